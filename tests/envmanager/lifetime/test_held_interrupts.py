"""Ctrl-C held while workers are stopped or started: delivered once the block ends, never lost."""

from __future__ import annotations

import signal

import pytest

from envmanager.lifetime.interrupts import interrupts_held


def test_a_ctrl_c_during_the_block_is_raised_once_it_ends():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
            finished.append(True)  # not cut short
    assert finished == [True]


def test_the_programs_own_handler_is_back_after_the_block():
    before = signal.getsignal(signal.SIGINT)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is before
