"""Each end of a one-way pipe closes its descriptor once, whichever of its finaliser and
``close()`` comes first, and crosses to a spawned process like a plain Connection."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from envmanager.lifetime.one_way_pipe import one_way_pipe


@pytest.mark.parametrize("end_index", [0, 1], ids=["reader", "writer"])
def test_closing_an_end_the_collector_finalised_first_closes_nothing_else(tmp_path, end_index):
    ends = one_way_pipe()
    end = ends[end_index]
    freed = end.fileno()
    end.__del__()  # what the collector does first when the end is in a dead reference cycle
    program_file = os.open(tmp_path / "program.txt", os.O_CREAT | os.O_RDWR)
    try:
        assert program_file == freed  # the program got the freed number
        end.close()
        os.fstat(program_file)  # still the program's: raises EBADF if the end closed it again
    finally:
        os.close(program_file)
        ends[1 - end_index].close()


def _send_back(writer) -> None:
    writer.send_bytes(b"from the spawned process")


def test_an_end_given_to_a_spawned_process_works_there():
    reader, writer = one_way_pipe()
    process = multiprocessing.get_context("spawn").Process(target=_send_back, args=(writer,))
    process.start()
    writer.close()
    try:
        assert reader.recv_bytes() == b"from the spawned process"
    finally:
        process.join()
        reader.close()
    assert process.exitcode == 0
