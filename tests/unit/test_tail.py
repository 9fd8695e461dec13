from trainwarden.agent.tail import LogTail


def test_partial_lines_wait_for_their_newline(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2\nstep=2 lo")
    tail = LogTail(log)
    assert [line.text for line in tail.poll()] == ["step=1 loss=2"]
    with open(log, "ab") as f:
        f.write(b"ss=1.5\n")
    lines = tail.poll()
    assert [line.text for line in lines] == ["step=2 loss=1.5"]
    assert lines[0].end == log.stat().st_size


def test_missing_file_then_created(tmp_path):
    log = tmp_path / "later.log"
    tail = LogTail(log)
    assert tail.poll() == []
    log.write_text("a=1\n")
    assert [line.text for line in tail.poll()] == ["a=1"]


def test_truncation_restarts_with_a_new_generation(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2\nstep=2 loss=1\n")
    tail = LogTail(log)
    tail.poll()
    log.write_text("x=1\n")  # copytruncate: same file, shorter content
    lines = tail.poll()
    assert [line.text for line in lines] == ["x=1"]
    assert tail.generation == 1


def test_invalid_utf8_and_crlf_do_not_break_following_lines(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"bad \xff\xfe bytes\r\nstep=2 loss=1.0\n")
    texts = [line.text for line in LogTail(log).poll()]
    assert texts[1] == "step=2 loss=1.0"
    assert texts[0].startswith("bad ")


def test_very_long_line_is_cut_not_stalled(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"x" * 5000 + b"\nstep=1 loss=1\n")
    tail = LogTail(log)
    first = tail.poll(max_bytes=1024)
    assert len(first) == 1
    assert len(first[0].text) == 1024
    rest = []
    for _ in range(10):
        rest += tail.poll(max_bytes=1024)
    assert rest[-1].text == "step=1 loss=1"


def test_resume_from_offset(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("a=1\nb=2\n")
    end_of_first = LogTail(log).poll()[0].end
    assert [line.text for line in LogTail(log, offset=end_of_first).poll()] == ["b=2"]


def test_carriage_returns_end_lines_and_crlf_is_one_terminator(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"a=1\r\nbar 10%\rbar 20%\rbar 3")
    tail = LogTail(log)
    assert [line.text for line in tail.poll()] == ["a=1", "bar 10%", "bar 20%"]
    assert tail.offset == len(b"a=1\r\nbar 10%\rbar 20%\r")


def test_a_carriage_return_at_the_end_waits_for_the_next_byte(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"x=1\r")
    tail = LogTail(log)
    assert tail.poll() == []  # may become '\r\n'
    with open(log, "ab") as f:
        f.write(b"\ny=2\n")
    lines = tail.poll()
    assert [(line.text, line.end) for line in lines] == [("x=1", 5), ("y=2", 9)]


def test_rename_rotation_reads_the_old_file_to_its_end_first(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("a=1\n")
    tail = LogTail(log)
    tail.poll()
    with open(log, "a") as f:
        f.write("a=2\npartial")
    log.rename(tmp_path / "train.log.1")
    log.write_text("b=1\n")
    lines = tail.poll() + tail.poll()  # without a clock, the renamed file is not waited for
    assert [(line.text, line.generation) for line in lines] == [("a=2", 0), ("partial", 0), ("b=1", 1)]


def test_rename_rotation_while_the_agent_was_stopped(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("a=1\n")
    tail = LogTail(log)
    tail.poll()
    saved = (tail.offset, tail.generation, tail.inode)
    with open(log, "a") as f:
        f.write("a=2\n")
    log.rename(tmp_path / "train.log-20261202")
    log.write_text("b=1\n")
    resumed = LogTail(log, offset=saved[0], generation=saved[1], inode=saved[2])
    texts = [line.text for line in resumed.poll()] + [line.text for line in resumed.poll()]
    assert texts == ["a=2", "b=1"]


def test_a_read_that_stops_at_a_full_chunk_says_more_is_waiting(tmp_path):
    """`behind` lets the agent read a backlog back to back instead of one chunk per poll interval."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={i} loss=2.5\n" for i in range(100)))
    tail = LogTail(log)
    lines = tail.poll(max_bytes=200)
    assert lines and tail.behind
    while tail.behind:
        lines += tail.poll(max_bytes=200)
    assert [line.text for line in lines] == [f"step={i} loss=2.5" for i in range(100)]
    assert tail.poll() == [] and not tail.behind
