"""The pieces on their own: framing, addresses and the leader ring, results,
the built-in tasks, tokens."""

from __future__ import annotations

import re
import struct

import pytest

from dtp.addresses import AddressError, HostPort, LeaderRing, parse_address_list, parse_host_port
from dtp.builtin_tasks import count_primes_below, count_words
from dtp.framing import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLargeError,
    ProtocolError,
    encode_frame,
)
from dtp.protocol import custom_name_problem, is_not_understood
from dtp.security import parse_tokens
from dtp.tasks import ResultNotJsonError, encode_result, result_too_large


def test_frames_cut_anywhere_decode_the_same() -> None:
    messages = [{"type": "HEARTBEAT", "workerId": f"w{n}", "ü": "ß" * n} for n in range(20)]
    stream = b"".join(encode_frame(m) for m in messages)
    for cut in (1, 2, 3, 5, 7, 64, len(stream)):
        decoder = FrameDecoder()
        out = []
        for i in range(0, len(stream), cut):
            out += decoder.feed(stream[i : i + cut])
        assert out == messages
        assert not decoder.in_frame


def test_bad_frames_are_protocol_errors() -> None:
    for header in (
        struct.pack(">i", 0),
        struct.pack(">i", -1),
        struct.pack(">i", MAX_FRAME_BYTES + 1),
    ):
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(header)
    for body in (
        b"\xef\xbb\xbf{}",
        b"[1]",
        b'{"no":"type"}',
        b"{",
        b'{"type":"X","v":2}',
        b'{"type":"X","n":NaN}',
        b"\xff",
    ):
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(struct.pack(">i", len(body)) + body)
    with pytest.raises(FrameTooLargeError):
        encode_frame({"type": "TASK_RESULT", "result": "x" * MAX_FRAME_BYTES})
    assert FrameDecoder().feed(encode_frame({"type": "X", "v": 1})) == [{"type": "X", "v": 1}]


def test_a_lone_surrogate_travels_escaped() -> None:
    frame = encode_frame({"type": "TASK_RESULT", "result": "a\ud800b"})
    assert b"\\ud800" in frame
    assert FrameDecoder().feed(frame)[0]["result"] == "a\ud800b"


def test_addresses_and_the_leader_ring() -> None:
    assert parse_host_port("h", 7070) == HostPort("h", 7070)
    assert parse_host_port("h:1", 7070) == HostPort("h", 1)
    assert parse_host_port("[::1]:2", 7070) == HostPort("::1", 2)
    assert parse_host_port("::1", 7070) == HostPort("::1", 7070)
    assert str(HostPort("::1", 3)) == "[::1]:3"
    for bad in ("", ":80", "h:0", "h:99999", "h:x"):
        with pytest.raises(AddressError):
            parse_host_port(bad, 7070)
    assert parse_address_list("a,b:2,a", 1) == [HostPort("a", 1), HostPort("b", 2)]
    ring = LeaderRing(parse_address_list("a,b,c", 1))
    assert ring.next() == HostPort("a", 1)
    ring.not_leader("c:1", 1)  # a standby named the leader: dial it next, at once
    assert not ring.should_pause()
    assert ring.next() == HostPort("c", 1)
    ring.succeeded()
    assert ring.next() == HostPort("c", 1)  # stays with the leader
    ring.failed()
    assert ring.next() == HostPort("a", 1)
    ring.failed()
    ring.next()
    ring.failed()
    assert ring.should_pause()  # a whole round failed


def test_a_named_leader_is_followed_only_when_it_is_a_plain_host_name_or_ip_address() -> None:
    ring = LeaderRing([HostPort("a", 1)])
    for leader in ("x\x00y", "a b", "l" * 64 + ".example", "\ud800", "x" * 400, "h:0"):
        ring.next()
        ring.not_leader(leader, 9)
        assert ring.next() == HostPort("a", 1), repr(leader[:20])
    for leader, host in (
        ("coord-2.example.com:9", "coord-2.example.com"),
        ("10.0.0.7", "10.0.0.7"),
    ):
        ring.not_leader(leader, 9)
        assert ring.next() == HostPort(host, 9)
    ring.not_leader("[fe80::1]:9", 7)
    assert ring.next() == HostPort("fe80::1", 9)


def test_results_follow_the_typescript_rules() -> None:
    assert encode_result("text") == ("text", "text")
    assert encode_result(None) == ("null", "json")
    assert encode_result({"a": [1, 2.5, True, None, "ü"]}) == (
        '{"a":[1,2.5,true,null,"ü"]}',
        "json",
    )
    for value, where in [
        ((1, 2), "result is a tuple"),
        ({"k": {1, 2}}, "result.k is a set"),
        ([b"x"], "result[0] is a bytes"),
        ({1: "x"}, "result has the key 1"),
        (float("nan"), "result is nan"),
        (2**53, "beyond 2**53 - 1"),
        ({"t": object()}, "result.t is a object"),
    ]:
        with pytest.raises(ResultNotJsonError, match=re.escape(where)):
            encode_result(value)
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ResultNotJsonError, match="cycle"):
        encode_result(cycle)
    assert result_too_large("x" * 524_288) is None
    assert result_too_large("x" * 524_289) == "result too large (524289 bytes; limit 524288)"
    assert result_too_large('"' * 300_000) == "result too large (600000 bytes; limit 524288)"


def test_builtins_and_names() -> None:
    assert [count_primes_below(n) for n in (2, 3, 10, 100, 1_000_000)] == [0, 1, 4, 25, 78498]
    assert count_words("one  two\tthree\nfour") == 4
    assert count_words("   ") == 0
    assert count_words("a\u00a0b\u3000c\ufeffd") == 4
    assert custom_name_problem("py.ok-1_x") is None
    assert "reserved" in (custom_name_problem("word-count") or "")
    assert "reserved" in (custom_name_problem("Sleep") or "")
    assert "does not match" in (custom_name_problem("a" * 65) or "")


def test_tokens_and_not_understood_answers() -> None:
    assert parse_tokens("# comment\n\n  one \r\ntwo\n") == ["one", "two"]
    assert is_not_understood({"message": "Malformed request: Undecodable message WAIT_JOB"})
    assert is_not_understood({"message": "x", "code": "UNSUPPORTED_REQUEST"})
    assert not is_not_understood({"message": "Unknown job: x", "code": "UNKNOWN_JOB"})
    assert not is_not_understood({"message": "Malformed request", "code": "NOT_LEADER"})


def test_a_model_class_as_schema_is_validated_through_model_validate() -> None:
    from dtp.tasks import _schema_callable

    class Model:  # the shape of a pydantic (v2) model class
        def __init__(self, name: str) -> None:
            self.name = name

        @classmethod
        def model_validate(cls, data: object) -> Model:
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                raise ValueError("name: field required")
            return cls(data["name"])

    check = _schema_callable(Model)
    assert check is not None
    model = check({"name": "ada"})
    assert isinstance(model, Model)
    assert model.name == "ada"
    with pytest.raises(ValueError, match="field required"):
        check({})
    assert _schema_callable(None) is None
