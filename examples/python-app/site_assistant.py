"""A tiny application on the official DeepSeek Harness Python client (`deepseek-harness-sdk`):
an assistant that works on a website's files, one conversation per client session. Its tests
(`tests/`) run it against a keyless runtime from the dsh-conformance pytest plugin; in
production `dsh_bin` is left out and the client runs the real runtime it ships.
"""

import threading
from dataclasses import dataclass

from deepseek_harness import DeepSeekHarness
from deepseek_harness.errors import HarnessError, JsonRpcError


@dataclass
class Reply:
    """What the app tells its user about one prompt."""

    text: str
    #: How the turn ended: completed, error, aborted, max-tokens, ... or "cancelled" (by `cancel`).
    ended: str
    conversation: str
    #: The turn's number in its conversation (2 for the first prompt after a cold resume).
    turn: int = 0
    error: str = ""


class ConversationNotFound(LookupError):
    """A conversation this home does not hold."""


class SiteAssistant:
    def __init__(self, *, project, dsh_home, api_key, dsh_bin=None, timeout=60.0):
        self._harness = DeepSeekHarness(
            dsh_bin=dsh_bin,
            dsh_home=str(dsh_home),
            cwd=str(project),
            api_key=api_key,
            initialize_timeout_seconds=timeout,
            request_timeout_seconds=timeout,
        )
        self._cancelled = threading.Event()

    def __enter__(self):
        self._harness.start()
        return self

    def __exit__(self, *_exc):
        self.close()

    def close(self):
        self._harness.close()

    def ask(self, prompt, conversation=None, on_event=None):
        """Sends `prompt` to `conversation` (a new one when None); `on_event(event)` sees each
        of the conversation's events as it comes."""
        session = self._harness.start_session(conversation)

        def watch(notification):
            event = notification.payload.get("event")
            if on_event is not None and notification.method == "session.event" and event:
                on_event(event)

        try:
            result = session.run(prompt, on_notification=watch)
        except HarnessError:
            if self._cancelled.is_set():
                return Reply(text="", ended="cancelled", conversation=session.id)
            raise
        ends = [e for e in result.events if e.get("type") == "turn/end"]
        reason = ((ends[-1].get("data") or {}).get("reason") or {}) if ends else {}
        starts = [e for e in result.events if e.get("type") == "turn/start"]
        return Reply(
            text=result.final_response,
            ended=result.finish_reason or "unknown",
            conversation=session.id,
            turn=(starts[-1].get("data") or {}).get("turn", 0) if starts else 0,
            error=str((reason.get("error") or {}).get("message", "")),
        )

    def resume(self, conversation):
        """Reopens a conversation an earlier process stored in this home (runtime 0.2.1)."""
        try:
            return self._harness.resume_session(conversation).id
        except JsonRpcError as error:
            if "not found" in error.message:
                raise ConversationNotFound(conversation) from None
            raise

    def move(self, conversation, directory):
        """Moves a conversation to another directory of the project (runtime 0.2.1)."""
        return self._harness.start_session(conversation).set_working_directory(directory)

    def cancel(self):
        """Stops the prompt in flight (from another thread): its `ask` returns "cancelled". The
        official client has no cancel request, so the app closes its runtime."""
        self._cancelled.set()
        self._harness.close()
