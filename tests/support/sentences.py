"""The sentences a person reads, taken from their one declaration,
Sources/LocalAuth/UserText.swift (the password prompt from the default
fallback title it is made of, Options.swift), so that every integration
test expects the words the module is built with. The unit tests' scenario
table (tests/unit/LocalAuthTests/Fakes.swift) keeps its own spelling of
each: it pins the wording, so a reworded sentence is a deliberate change
there and followed here without editing a test."""
import re

from pamenv import ROOT

_DECLARATION = ROOT / "Sources" / "LocalAuth" / "UserText.swift"
_CONSTANT = re.compile(r'static (?:var|let) (\w+)(?:: String \{\s*| = )"((?:[^"\\]|\\.)*)"\s*(?:\}|$)', re.M)


def _declared():
    sentences = dict(_CONSTANT.findall(_DECLARATION.read_text()))
    if not sentences:
        raise RuntimeError(f"no sentences found in {_DECLARATION}")
    return sentences


_SENTENCES = _declared()


def sentence(name):
    """The sentence UserText declares as `name` (a constant one)."""
    try:
        return _SENTENCES[name]
    except KeyError:
        raise KeyError(f"UserText.swift declares no constant sentence {name!r}: {sorted(_SENTENCES)}") from None


FIRST_PROMPT = sentence("firstPrompt")
LOCKED = sentence("locked")
NOT_RECOGNIZED = sentence("notRecognized")
NO_MATCH_TOUCH_OR_TYPE = sentence("noMatchTouchOrType")
READER_BUSY = sentence("readerBusy")
READER_FAILING = sentence("readerFailing")
TIMED_OUT = sentence("timedOut")
DISCONNECTED = sentence("disconnected")
STOPPED = sentence("stopped")
NOT_RECORDED = sentence("notRecorded")


def _default_fallback_title():
    """The `fallback_title` the module is built with (Options.swift)."""
    declaration = ROOT / "Sources" / "LocalAuth" / "Options.swift"
    found = re.search(r'var fallbackTitle: \[UInt8\] = literalBytes\("((?:[^"\\]|\\.)*)"\)', declaration.read_text())
    if not found:
        raise RuntimeError(f"no default fallbackTitle found in {declaration}")
    return found.group(1)


# UserText.passcodePrompt with the default options: the fallback title and ": ".
PASSCODE_PROMPT = _default_fallback_title() + ": "
