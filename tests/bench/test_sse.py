"""SSE splitting keeps each event's arrival time and survives arbitrary block boundaries."""

from infercast.bench.sse import SSEDecoder


def test_event_gets_time_of_block_that_completes_it():
    d = SSEDecoder()
    assert d.feed(b'data: {"a"', 1.0) == []
    assert d.feed(b": 1}\n", 2.0) == []
    assert d.feed(b"\ndata: x\n\ndata: [DONE]\n\n", 3.0) == [
        (3.0, b'{"a": 1}'),
        (3.0, b"x"),
        (3.0, b"[DONE]"),
    ]


def test_crlf_comments_multiline_and_unterminated_tail():
    d = SSEDecoder()
    events = d.feed(b": keep-alive\r\n\r\nevent: m\r\ndata: a\r\ndata: b\r\n\r\ndata: tail", 5.0)
    assert events == [(5.0, b"a\nb")]
    assert d.close(6.0) == [(6.0, b"tail")]
    assert d.close(7.0) == []
