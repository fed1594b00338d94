"""Serve any rubricgym env over OpenEnv's wire protocol, and use a served env like a local one.

``rubricgym serve ENV_ID`` (``serve``/``ServerThread``) runs the FastAPI server; ``RemoteEnv`` (or
``rubricgym.make("ws://host:port")``) is the client; ``DockerProvider`` runs the server in a container. The
server needs the ``server`` extra (``pip install 'rubricgym[server]'``).
"""

from rubricgym.server.app import EnvServer, ServerConfig, create_app
from rubricgym.server.docker import DockerProvider, ProviderError
from rubricgym.server.remote import RemoteEnv, RemoteError
from rubricgym.server.run import ServerThread, serve

__all__ = [
    "DockerProvider",
    "EnvServer",
    "ProviderError",
    "RemoteEnv",
    "RemoteError",
    "ServerConfig",
    "ServerThread",
    "create_app",
    "serve",
]
