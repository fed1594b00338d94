"""The bundled apps' task templates; importing this package registers all of them in ``TEMPLATES``."""

from rubricgym.envs.gui.templates import calendar, contacts, mail, notes, settings, shop  # noqa: F401
from rubricgym.envs.gui.templates.base import TEMPLATES, Spec, Template, template

__all__ = ["TEMPLATES", "Spec", "Template", "template"]
