"""A conversation scripted from Python: each `Turn` is what one prompt's turn does, written as
fake-dsh's SDK scenario (the `sdk` member of the file `FAKE_DSH_SCENARIO` names; the language is
the kit's `schemas/sdk-scenario.schema.json`, docs/surface-sdk.md "fake-dsh's SDK surfaces"), and,
for a run against the real runtime, as replies of the kit's model server
(`dsh-conformance model-server --script`), so one test scripts both the same way.

    fake_dsh.script(Turn.text("Hello"), Turn.write("notes.md", "# Notes", then="Saved."))

The n-th prompt a runtime process accepts plays the n-th turn; later prompts get fake-dsh's
default agent (a `write` of index.html, then "I wrote index.html.").
"""

import json

__all__ = ["Turn", "ScenarioError", "scenario_document", "model_script"]


class ScenarioError(ValueError):
    """A scripted turn or scenario file that fake-dsh would not play: the message names it."""


def _text(value, what):
    if not isinstance(value, str):
        raise ScenarioError(f"{what} must be a string, not {type(value).__name__}: {value!r}")
    return value


def _millis(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{what} must be a whole number of milliseconds >= 0, not {value!r}")
    return value


class Turn:
    """One prompt's turn. Build it with the class methods; `fake_dsh.script(*turns)` plays them."""

    __slots__ = ("_fake", "_real", "_label")

    def __init__(self, fake, real, label):
        self._fake = fake
        self._real = real
        self._label = label

    def __repr__(self):
        return f"Turn.{self._label}"

    @classmethod
    def text(cls, text, *, reasoning=None, delay_ms=0):
        """A completed turn answering `text` (after `delay_ms`: a slow model)."""
        step = {"text": _text(text, "Turn.text's text")}
        reply = {"text": text}
        if reasoning is not None:
            step["reasoning"] = reply["reasoning"] = _text(reasoning, "reasoning")
        if _millis(delay_ms, "delay_ms"):
            step["delay_ms"] = delay_ms
            reply["drip_ms"] = delay_ms
        return cls({"steps": [step], "end": "completed"}, [reply], f"text({text!r})")

    @classmethod
    def slow(cls, text, delay_ms):
        """A completed turn whose answer comes after `delay_ms` (a turn to cancel, a timeout)."""
        return cls.text(text, delay_ms=delay_ms)

    @classmethod
    def write(cls, path, content, *, then="Done."):
        """A `write` tool call of `content` to `path` (relative to the session's directory: a
        real file), then the text `then`."""
        arguments = {
            "file_path": _text(path, "Turn.write's path"),
            "content": _text(content, "Turn.write's content"),
        }
        if not path:
            raise ScenarioError("Turn.write's path is empty")
        call = {"name": "write", "arguments": arguments}
        fake = {
            "steps": [{"tool_calls": [call]}, {"text": _text(then, "Turn.write's then")}],
            "end": "completed",
        }
        real = [{"tool_calls": [call]}, {"when": {"after_tool": "write"}, "text": then}]
        return cls(fake, real, f"write({path!r})")

    @classmethod
    def error(cls, message=None, *, code=None):
        """A turn that fails: `turn/end` kind `error`. Without arguments, the failure a model's
        401 gives (code `AUTH`), which the real runtime plays too; a `message` or `code` of your
        own is fake-dsh's only."""
        if message is None and code is None:
            return cls({"steps": [], "end": "error"}, [{"status": 401}], "error()")
        error = {
            "message": _text(message or "fake-dsh: scripted model failure", "message"),
            "code": _text(code or "UNKNOWN", "code"),
        }
        return cls({"steps": [], "end": "error", "error": error}, None, f"error({message!r})")

    @classmethod
    def aborted(cls, text=None):
        """A turn ended as cancelled (`turn/end` kind `aborted`), after `text` if given.
        fake-dsh's only: the real runtime's cancelled turn was not observed on this wire."""
        steps = [] if text is None else [{"text": _text(text, "Turn.aborted's text")}]
        return cls({"steps": steps, "end": "aborted"}, None, "aborted()")

    @classmethod
    def max_tokens(cls, text):
        """A turn cut by the token limit (`turn/end` kind `max-tokens`) after `text`."""
        fake = {"steps": [{"text": _text(text, "Turn.max_tokens's text")}], "end": "max-tokens"}
        return cls(fake, None, f"max_tokens({text!r})")

    def fake_dsh(self):
        """The turn in fake-dsh's scenario language."""
        return json.loads(json.dumps(self._fake))

    def model_replies(self):
        """The model server's replies that make the real runtime play this turn."""
        if self._real is None:
            raise ScenarioError(
                f"Turn.{self._label} is fake-dsh's only: the real runtime cannot be scripted to it "
                "through the model server"
            )
        return json.loads(json.dumps(self._real))


def _turns(turns):
    for index, turn in enumerate(turns):
        if not isinstance(turn, Turn):
            raise ScenarioError(
                f"turn {index + 1} is {turn!r}, not a Turn (Turn.text, Turn.write, Turn.error, ...)"
            )
    return turns


def scenario_document(turns, **members):
    """The scenario file's document: `{"sdk": {"turns": [...], **members}}` (members such as
    `initialize_delay_ms` are fake-dsh's scenario members, checked by fake-dsh itself)."""
    sdk = {"turns": [turn.fake_dsh() for turn in _turns(turns)]}
    sdk.update(members)
    return {"sdk": sdk}


#: The real runtime asks its model for a session title (a request offering no tools).
_TITLE_REPLY = {"when": {"tools": False}, "reuse": True, "text": "Scripted session"}


def model_script(turns):
    """The model server's script that makes the real runtime play `turns`, in order."""
    replies = [dict(_TITLE_REPLY)]
    for turn in _turns(turns):
        replies.extend(turn.model_replies())
    return {"replies": replies}
