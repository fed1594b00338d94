"""Settings templates: switches, choices, brightness, device name, and reading a setting."""

from __future__ import annotations

from rubricgym.envs.gui.templates.base import DONE, G, Spec, answer, click, fill, pick, press, select, template

SWITCHES = {
    "wifi": ("Wi-Fi", "Network"),
    "bluetooth": ("Bluetooth", "Network"),
    "dark_mode": ("Dark mode", "Display"),
    "notifications": ("Notifications", "System"),
    "location": ("Location services", "System"),
    "auto_update": ("Automatic updates", "System"),
}
CHOICES = {
    "language": ("Language", "System", ["English", "Español", "Français", "Deutsch", "Italiano"]),
    "font_size": ("Font size", "Display", ["Small", "Medium", "Large", "Extra large"]),
    "timezone": ("Time zone", "System", ["UTC", "Europe/London", "Europe/Paris", "America/New_York", "Asia/Tokyo"]),
}


def _toggle(rng, s, to: bool):
    key = pick(rng, sorted(SWITCHES))
    s["settings"][key] = not to
    label, section = SWITCHES[key]
    word = "on" if to else "off"
    return Spec(
        f"Turn {word} {label}.",
        [G(f"settings.{key}", to)],
        [click("link", section), click("switch", label), DONE],
        [f"settings.{key}"],
    )


@template("settings.turn_on", "settings", 1)
def turn_on(rng, s):
    return _toggle(rng, s, True)


@template("settings.turn_off", "settings", 1)
def turn_off(rng, s):
    return _toggle(rng, s, False)


def _choice(rng, s, key):
    label, section, values = CHOICES[key]
    value = pick(rng, [v for v in values if v != s["settings"][key]])
    return Spec(
        f"Set the {label.lower()} to {value}.",
        [G(f"settings.{key}", value)],
        [click("link", section), select(label, value), DONE],
        [f"settings.{key}"],
    )


@template("settings.language", "settings", 2)
def language(rng, s):
    return _choice(rng, s, "language")


@template("settings.font_size", "settings", 2)
def font_size(rng, s):
    return _choice(rng, s, "font_size")


@template("settings.timezone", "settings", 2, split="test")
def timezone(rng, s):
    return _choice(rng, s, "timezone")


@template("settings.brightness", "settings", 2)
def brightness(rng, s):
    value = pick(rng, [v for v in range(10, 101, 10) if v != s["settings"]["brightness"]])
    return Spec(
        f"Set the screen brightness to {value}%.",
        [G("settings.brightness", value)],
        [click("link", "Display"), fill("spinbutton", "Brightness (%)", str(value)), press("Enter"), DONE],
        ["settings.brightness"],
    )


@template("settings.rename_device", "settings", 2)
def rename_device(rng, s):
    name = pick(rng, ["Work phone", "Kitchen tablet", "Travel phone", "Old phone", "Test device"])
    return Spec(
        f"Rename this device to {name}.",
        [G("settings.device_name", name)],
        [click("link", "About"), fill("textbox", "Device name", name), click("button", "Rename device"), DONE],
        ["settings.device_name"],
    )


@template("settings.airplane", "settings", 1, split="test")
def airplane(rng, s):
    return Spec(
        "Turn on airplane mode.",
        [G("settings.airplane_mode", True)],
        [click("link", "Network"), click("switch", "Airplane mode"), DONE],
        ["settings.airplane_mode", "settings.wifi", "settings.bluetooth"],
    )


@template("settings.device_name", "settings", 1)
def device_name(rng, s):
    return Spec(
        "What is this device called? Answer in the field `name`.",
        [G("answer.name", s["settings"]["device_name"], "ieq")],
        [click("link", "About"), answer(name=s["settings"]["device_name"]), DONE],
        answer_fields=["name"],
    )


@template("settings.night_reading", "settings", 3)
def night_reading(rng, s):
    s["settings"]["dark_mode"] = False
    size = pick(rng, [v for v in ("Large", "Extra large") if v != s["settings"]["font_size"]])
    return Spec(
        f"Set up the phone for reading at night: turn on dark mode and set the font size to {size}.",
        [G("settings.dark_mode", True), G("settings.font_size", size)],
        [click("link", "Display"), click("switch", "Dark mode"), select("Font size", size), DONE],
        ["settings.dark_mode", "settings.font_size"],
    )
