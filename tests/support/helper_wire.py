"""The helper's wire format, for tests that play its client or its peer:
frames of a type byte and a 32-bit big-endian length, a HELLO first."""
import select
import struct

HELLO, REQUEST = 0x01, 0x02
TEXT_INFO, ERROR_TEXT, PROMPT_OFF, PROMPT_ON = 0x10, 0x11, 0x12, 0x13
FALLBACK_OFFERED = 0x14                 # version 2
REPLY, NO_ANSWER, CANCEL, USER_CANCEL, USER_FALLBACK = 0x20, 0x21, 0x22, 0x23, 0x24
PASSWORD_TYPED = 0x25                   # version 3, after a REQUEST with keys=client
SECRET, ITEM_NAME, SECRET_STATUS = 0x26, 0x32, 0x33   # version 4, the secret actions
RESULT = 0x30
CLIENT_HELLO = b"LAH\x01"              # version 1: what most tests speak (a helper still answers it)
CLIENT_HELLO_V2 = b"LAH\x02"           # version 2: FALLBACK_OFFERED
CLIENT_HELLO_V3 = b"LAH\x03"           # version 3: PASSWORD_TYPED and keys=client
CLIENT_HELLO_V4 = b"LAH\x04"           # version 4: the secret actions
STATUS_EVALUATED, STATUS_REFUSED, STATUS_NOT_PRIVILEGED, STATUS_INTERNAL = 0, 1, 2, 3


def frame(kind, payload=b""):
    return struct.pack(">BI", kind, len(payload)) + payload


def request(service="i3lock", **fields):
    """A REQUEST payload: NUL-separated key=value fields."""
    items = [("action", fields.pop("action", "evaluate")), ("service", service)] + list(fields.items())
    return b"\0".join(f"{k}={v}".encode() for k, v in items)


def read_exact(sock, count, timeout):
    data = b""
    while len(data) < count:
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            raise TimeoutError(f"{len(data)} of {count} bytes within {timeout} s")
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def read_frame(sock, timeout=15.0):
    kind, length = struct.unpack(">BI", read_exact(sock, 5, timeout))
    return kind, read_exact(sock, length, timeout) if length else b""


def parse_result(payload):
    status, pam, error, method, delay = struct.unpack(">BiiBB", payload[:11])
    return {"status": status, "pam": pam, "error": error, "method": method, "fail_delay": delay,
            "domain_state": payload[11:]}


def converse(sock, answers=(), timeout=15.0, on_frame=None):
    """Reads frames until RESULT, answering each prompt with the next answer
    (no answer left: NO_ANSWER). -> (messages [(kind, text)], result dict)."""
    answers = list(answers)
    messages = []
    while True:
        kind, payload = read_frame(sock, timeout)
        if on_frame:
            on_frame(kind, payload)
        if kind == RESULT:
            return messages, parse_result(payload)
        messages.append((kind, payload.decode(errors="replace")))
        if kind in (PROMPT_OFF, PROMPT_ON):
            sock.sendall(frame(REPLY, answers.pop(0).encode()) if answers else frame(NO_ANSWER))
