import json

import pytest

from rubricgym.core.parsing import call_error, format_parse_error, parse_action, parse_call, parse_tool_call
from rubricgym.core.types import Message, ToolCall, ToolSpec

TOOLS = [
    ToolSpec(
        name="calculator",
        description="calc",
        parameters={
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="answer",
        description="answer",
        parameters={"type": "object", "properties": {"value": {"type": ["number", "string"]}}, "required": ["value"]},
    ),
]


@pytest.mark.parametrize(
    "text",
    [
        'Let me compute. <tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>',
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n',  # unterminated tag (stopped early)
        'Sure:\n```json\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n```',
        'I will call {"name": "calculator", "arguments": {"expression": "2+3"}} now',
        '{"type": "function", "function": {"name": "calculator", "arguments": "{\\"expression\\": \\"2+3\\"}"}}',
        '{"tool": "calculator", "args": {"expression": "2+3"}}',
    ],
)
def test_formats_models_emit_are_parsed(text):
    action = parse_action(text, TOOLS)
    assert action.parse_error is None
    assert action.tool_call.name == "calculator"
    assert action.tool_call.arguments == {"expression": "2+3"}
    assert action.text == text


def test_structured_api_tool_calls_are_used_first():
    msg = Message(role="assistant", content="", tool_calls=[ToolCall(id="c9", name="answer", arguments={"value": 5})])
    action = parse_action(msg, TOOLS)
    assert action.structured and action.tool_call.id == "c9" and action.parse_error is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("no call here", "no tool call found"),
        ('<tool_call>{"name": "calculator", "arguments": {"expression": }</tool_call>', "valid JSON"),
        ("<tool_call></tool_call>", "empty"),
        ('{"name": "calc", "arguments": {}}', "unknown tool 'calc'"),
        ('{"name": "calculator", "arguments": {}}', "missing required argument(s): expression"),
        ('{"name": "calculator", "arguments": {"expression": 5}}', "must be string"),
        ('{"name": "calculator", "arguments": {"expression": "1", "x": 2}}', "unknown argument(s): x"),
        ('{"name": "answer", "arguments": {"value": true}}', "must be number or string"),
        ('{"arguments": {"value": 1}}', "no 'name'"),
        ('{"name": "answer", "arguments": "{bad"}', "not valid JSON"),
        ('{"name": "x"', "no complete JSON object"),
    ],
)
def test_malformed_calls_become_errors_that_say_what_is_wrong(text, reason):
    action = parse_action(text, TOOLS)
    assert action.tool_call is None or action.parse_error
    assert reason in action.parse_error


def test_error_observation_shows_correct_calls():
    text = format_parse_error("no tool call found", TOOLS)
    assert "no tool call found" in text
    assert parse_action(text.splitlines()[2], TOOLS).parse_error is None  # the example it shows is itself valid


def test_lone_surrogates_are_replaced_at_the_boundary():
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+\\ud83d", "\\udcffk": ["\\ud800"]}}'
    action = parse_action(text + "</tool_call> \ud83d", TOOLS)
    args = action.tool_call.arguments
    assert args["expression"] == "2+\ufffd" and args["\ufffdk"] == ["\ufffd"]
    assert "\ud83d" not in action.text and action.text.endswith("\ufffd")
    msg = Message(
        role="assistant",
        content="x\udcff",
        tool_calls=[ToolCall(name="calculator", arguments={"expression": "\ud83d"})],
    )
    structured = parse_action(msg, TOOLS)
    assert structured.tool_call.arguments == {"expression": "\ufffd"} and structured.text == "x\ufffd"
    for a in (action, structured):
        a.model_dump_json()  # encodable


def test_parse_call_cleans_decoded_strings_only_when_they_may_hold_a_surrogate():
    # parse_call skips the per-string scan when its source is ASCII without a \\u escape; a raw surrogate in the
    # text itself, or an escaped one, is still replaced (parse_call is public: its text may not be cleaned)
    raw = parse_call('<tool_call>{"name": "calc\udcff", "arguments": {"expression": "2+\ud83d"}}</tool_call>')
    escaped = parse_call('<tool_call>{"name": "calculator", "arguments": {"x": ["\\ud800"]}}</tool_call>')
    plain = parse_call(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "caf\\u00e9 \u00e9"}}</tool_call>'
    )
    assert raw == ("calc\ufffd", {"expression": "2+\ufffd"})
    assert escaped == ("calculator", {"x": ["\ufffd"]})
    assert plain == ("calculator", {"expression": "caf\u00e9 \u00e9"})


KINDS = ToolSpec(
    name="kinds",
    description="one argument per JSON type",
    parameters={
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "a": {"type": "array"},
            "o": {"type": "object"},
            "maybe": {"type": ["string", "null"]},
            "odd": {"type": "decimal"},
            "free": {},
        },
    },
)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"i": 3, "n": 2.5, "b": False, "a": [], "o": {}, "maybe": None, "odd": "x", "free": [1]}, None),
        ({"i": 3.0, "n": 2, "maybe": "s", "odd": 1}, None),  # a whole float is an integer; an int is a number
        ({"i": True}, "argument 'i' of tool 'kinds' must be integer, got bool"),
        ({"i": 3.5}, "must be integer, got float"),
        ({"n": False}, "must be number, got bool"),
        ({"n": "2"}, "must be number, got str"),
        ({"b": 1}, "must be boolean, got int"),
        ({"a": {}}, "must be array, got dict"),
        ({"o": []}, "must be object, got list"),
        ({"maybe": 1}, "must be string or null, got int"),
    ],
)
def test_argument_types_follow_json_schema(arguments, error):
    got = call_error("kinds", arguments, [KINDS])
    assert got == error if error is None else error in got


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>',
        '<tool_call> {"name": "a", "arguments": {"x": [1, 2.5, null, true], "y": {"z": "é"}}} </tool_call>',
        '<tool_call>{"name": "a", "arguments": {"x": 1, "x": 2}}</tool_call>',  # the last duplicate wins
        '<tool_call>{"name": "a"}</tool_call>',  # no arguments
        '<tool_call>{"name": "a", "arguments": null}</tool_call>',
        '<tool_call>{"name": "a", "arguments": {}, "id": "call_7"}</tool_call>',  # model text gives no id
        '<tool_call>{"id": null, "name": "a", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "a", "arguments": {"q": "\\"id\\": 1"}}</tool_call>',  # "id" in a value, not a key
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>',  # OpenAI's string arguments
        '<tool_call>{"function": {"name": "a", "arguments": {"x": 1}}}</tool_call>',
        '<tool_call>{"name": "a", "arguments": {"x": 1}}} trailing</tool_call>',
        '<tool_call>{"name": "a", "arguments": {"x": "\\ud83d"}}</tool_call>',
        '<tool_call>{"name": "a", "arguments": {"x": NaN, "y": 1e400}}',  # unclosed: the model hit a stop
        '<tool_call>{"name": 5, "arguments": {}}</tool_call>',
        '<tool_call>{"name": "a", "arguments": {"x": "line\nbreak"}}</tool_call>',
        "<tool_call></tool_call>",
        '```json\n{"name": "a", "arguments": {"x": 1}}\n```',
        "no call at all",
    ],
)
def test_parse_tool_call_gives_parse_calls_call(text):
    got, parsed = parse_tool_call(text), parse_call(text)
    if isinstance(parsed, str):
        assert got == parsed
    else:
        assert isinstance(got, ToolCall) and got.id is None
        assert got.name == parsed[0]
        assert json.dumps(got.arguments) == json.dumps(parsed[1])  # NaN-safe, and 1 is not 1.0


@pytest.mark.parametrize(
    ("parameters", "arguments", "error"),
    [
        # every property required: the call's keys are compared with the properties in one step
        (
            {"properties": {"x": {}, "y": {}}, "required": ["x", "y"], "additionalProperties": False},
            {"x": 1, "y": 2},
            None,
        ),
        (
            {"properties": {"x": {}, "y": {}}, "required": ["x", "y"], "additionalProperties": False},
            {"x": 1},
            "missing required argument(s): y",
        ),
        (
            {"properties": {"x": {}, "y": {}}, "required": ["x", "y"], "additionalProperties": False},
            {"x": 1, "y": 2, "z": 3},
            "unknown argument(s): z",
        ),
        (
            {"properties": {"x": {}}, "required": ["x", "y"], "additionalProperties": False},
            {"x": 1},
            "missing required argument(s): y",
        ),  # required but undeclared
        ({"properties": {"x": {}, "y": {}}, "required": ["x"], "additionalProperties": False}, {"x": 1}, None),
        (
            {"properties": {"x": {}, "y": {}}, "required": ["x"], "additionalProperties": False},
            {"y": 1},
            "missing required argument(s): x",
        ),
        ({"properties": {"x": {}}, "required": ["x"]}, {"x": 1, "extra": 2}, None),  # open schema
        ({"properties": {}, "required": [], "additionalProperties": False}, {}, None),
        ({"properties": {}, "required": [], "additionalProperties": False}, {"x": 1}, "unknown argument(s): x"),
    ],
)
def test_required_and_unknown_arguments_whatever_the_schema_shape(parameters, arguments, error):
    got = call_error("t", arguments, [ToolSpec(name="t", description="T.", parameters=parameters)])
    assert got == error if error is None else error in got
