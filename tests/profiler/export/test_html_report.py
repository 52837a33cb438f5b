"""Specification of the HTML report: one self-contained page, every section, names escaped."""

from __future__ import annotations

import html
import re

import pytest

import profiler
from profiler import get_timer_tree, hierarchical_timer
from profiler.analysis.verdicts import judge_run
from profiler.export.html_report import to_html_report

HOSTILE_NAME = "<script>document.documentElement.setAttribute('data-pwned','1')</script>"


def frame_count(page):
    return page.count('<div class="frame')


@pytest.fixture
def hostile_tree(fake_clock):
    with hierarchical_timer(HOSTILE_NAME):
        fake_clock.advance(0.002)
    with hierarchical_timer('quote " and & ampersand'):
        fake_clock.advance(0.001)
    return get_timer_tree()


@pytest.mark.parametrize("run", ["trainer_tree", "run_with_workers", "run_with_timeline", "mlagents_tree"])
def test_the_page_fetches_nothing_from_the_network(run, request):
    page = to_html_report(request.getfixturevalue(run))
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", page, re.IGNORECASE)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page, re.IGNORECASE)
    assert not re.search(r"\bsrc\s*=|@import|url\(", page, re.IGNORECASE)
    assert "default-src 'none'" in page  # and the browser is told to refuse any fetch


def test_block_names_are_escaped_wherever_they_appear(hostile_tree):
    page = to_html_report(hostile_tree)
    assert "<script>document" not in page
    assert "&lt;script&gt;document.documentElement.setAttribute(&#x27;data-pwned&#x27;,&#x27;1&#x27;)" in page
    assert 'data-name="quote &quot; and &amp; ampersand"' in page
    assert page.count("<script>") == 1  # the report's own script


def test_the_flame_graph_has_a_bar_per_block(trainer_tree):
    blocks = 1 + 5 + 1  # the root, train, vector.step, wait, policy.act, policy.update; untimed
    assert frame_count(to_html_report(trainer_tree)) == blocks


def test_a_bar_carries_the_numbers_shown_on_hover(trainer_tree):
    page = to_html_report(trainer_tree)
    bar = re.search(r'<div class="frame[^>]*data-name="policy.update"[^>]*>', page).group(0)
    assert 'data-total="10 ms"' in bar
    assert 'data-self="10 ms"' in bar
    assert 'data-count="1"' in bar
    assert 'data-share="' in bar


def test_parallel_blocks_are_marked_in_the_flame_graph(run_with_workers):
    page = to_html_report(run_with_workers)
    bar = re.search(r'<div class="frame[^>]*data-name="worker_root"[^>]*>', page).group(0)
    assert 'data-parallel="true"' in bar


def test_the_report_opens_with_the_verdicts_of_the_verdict_engine(run_with_workers):
    page = to_html_report(run_with_workers)
    assert page.index('<section id="verdicts">') < page.index('<section id="summary">')
    titles = re.findall(r'<li class="verdict[^"]*" data-kind="[^"]+"><div><span class="tag">[^<]+</span> '
                        r"([^<]+)</div>", page)
    assert titles == [html.escape(verdict.title) for verdict in judge_run(run_with_workers).verdicts]


def test_each_verdict_shows_its_cost_evidence_and_suggestion(run_with_workers):
    page = to_html_report(run_with_workers)
    straggler = re.search(r'<li class="verdict" data-kind="straggler">.*?</li>', page, re.DOTALL).group(0)
    assert "costs 24 ms (" in straggler
    assert "<th>worker</th><td>worker 2</td>" in straggler
    assert "Find what makes worker 2" in straggler


def test_the_worker_the_verdicts_name_a_straggler_is_highlighted(run_with_workers):
    page = to_html_report(run_with_workers)
    straggler_rows = re.findall(r'<div class="worker-row straggler">.*?</div>\n', page)
    assert len(straggler_rows) == 1
    assert "worker 2" in straggler_rows[0]
    assert "straggler (see the verdicts)" in straggler_rows[0]


def test_balanced_workers_are_not_highlighted(run_with_workers):
    for worker in run_with_workers["workers"]:
        worker["children"][0]["total"] = 0.012  # every worker's env.step: 3 ms a call
    page = to_html_report(run_with_workers)
    assert '<div class="worker-row straggler">' not in page
    assert 'data-kind="workers_balanced"' in page


def test_each_worker_row_names_the_host_it_ran_on_when_the_run_recorded_it(run_with_workers):
    for worker in run_with_workers["workers"]:
        worker["host"] = f"env-node-{worker['worker_id']}"
    rows = re.findall(r'<span class="worker-name">(.*?)</span></span>', to_html_report(run_with_workers))
    assert rows and all(f"worker {index} <span class=\"note\">@ env-node-{index}" in row for index, row in enumerate(rows))


def test_a_run_without_workers_says_so(trainer_tree):
    assert "This run has no per-worker trees." in to_html_report(trainer_tree)


def test_gauges_of_the_trainer_and_of_each_worker_are_listed(run_with_workers):
    page = to_html_report(run_with_workers)
    assert "<td class=\"name\">trainer</td><td class=\"name\">reward</td>" in page
    assert "<td class=\"name\">worker 1</td><td class=\"name\">episode_length</td>" in page


def test_recorded_counters_are_drawn_over_time(run_with_timeline):
    page = to_html_report(run_with_timeline)
    assert page.count("<polyline") == 2  # trainer cpu_percent, worker 0 rss_mb
    assert "trainer: cpu_percent (min 40.0 %, max 85.0 %, last 40.0 %" in page


def test_rlprofs_own_counters_are_in_their_unit_and_explained():
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [], "metadata": {},
            "gauges": {"resources.worker_0.rss_mb": {"value": 312.5, "min": 300.0, "max": 312.5,
                                                     "count": 4}}}
    page = to_html_report(tree)
    assert "312.5 MiB" in page and "resident memory of worker 0" in page


@pytest.mark.parametrize("metadata, title", [
    ({"run_id": "ppo-7"}, "ppo-7"),
    ({"rlprof_run": "/home/me/cleanrl/ppo.py"}, "ppo.py"),
    ({"command_line_arguments": "python train.py --envs 8"}, "train.py"),
    ({}, "rlprof run"),
])
def test_the_report_is_titled_with_the_runs_name(metadata, title):
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [], "gauges": {},
            "metadata": metadata}
    assert f"<h1>rlprof report: {title}</h1>" in to_html_report(tree)


def test_worker_bars_are_scaled_to_the_means_not_to_one_slow_call(run_with_workers):
    page = to_html_report(run_with_workers)
    widths = [float(width) for width in re.findall(r'class="mean" style="width:([0-9.]+)%', page)]
    assert max(widths) == pytest.approx(100 / 1.25)


def test_the_top_blocks_table_puts_the_most_self_time_first(trainer_tree):
    page = to_html_report(trainer_tree)
    table = page[page.index('id="top-blocks"') :]
    names = re.findall(r'<td class="name" data-value="([^"]*)">', table)
    assert names[:2] == ["wait", "policy.update"]


def test_the_top_blocks_table_gives_each_blocks_shortest_and_longest_call(fake_clock):
    for seconds in (0.002, 0.020, 0.005):
        with hierarchical_timer("policy.update"):
            fake_clock.advance(seconds)
    page = to_html_report(get_timer_tree())
    table = page[page.index('id="top-blocks"') :]
    assert "<th class=\"number sortable\">shortest call</th>" in table
    row = table[table.index('data-value="policy.update"') :].split("</tr>")[0]
    assert ">2 ms</td>" in row and ">20 ms</td>" in row


def test_blocks_from_a_file_without_per_call_extremes_show_a_dash(trainer_tree):
    def strip(node):
        node.pop("min", None)
        node.pop("max", None)
        for child in node["children"]:
            strip(child)

    strip(trainer_tree)
    page = to_html_report(trainer_tree)
    table = page[page.index('id="top-blocks"') :]
    row = table[table.index('data-value="wait"') :].split("</tr>")[0]
    assert row.count(">–</td>") == 2


def test_the_frames_of_a_run_are_listed_with_their_rate(fake_clock):
    frame = profiler.Domain("game").new_frame("frame")
    for _ in range(3):
        with frame:
            fake_clock.advance(0.020)
    page = to_html_report(get_timer_tree())
    section = page[page.index('<section id="frames">'):].split("</section>")[0]
    assert '<td class="name">frame <span class="tag">game</span></td>' in section
    assert '<td class="number">3</td><td class="number">20 ms</td>' in section
    assert '<td class="number">50.0</td>' in section


def test_a_run_without_frames_has_no_frames_section(trainer_tree):
    assert 'id="frames"' not in to_html_report(trainer_tree)


def test_the_run_metadata_is_shown(trainer_tree):
    page = to_html_report(trainer_tree)
    assert f"<th>python_version</th><td class=\"name\">{trainer_tree['metadata']['python_version']}</td>" in page


def test_a_trainer_block_and_a_parallel_block_of_the_same_name_get_separate_rows(run_with_workers):
    vector_step = run_with_workers["children"][0]["children"][0]
    vector_step["children"].insert(0, {"name": "send", "total": 0.001, "count": 4, "self": 0.001, "children": []})
    page = to_html_report(run_with_workers)
    table = page[page.index('id="top-blocks"') :]
    assert table.count('data-value="send">send</td>') == 1
    assert table.count('data-value="send">send<span class="tag">parallel</span></td>') == 1


def test_workers_that_never_ran_a_block_count_as_no_worker_trees(trainer_tree):
    trainer_tree["workers"] = [{"name": "worker 0", "total": 0.0, "count": 0, "self": 0.0, "children": [
        {"name": "env.step", "total": 0.0, "count": 0, "self": 0.0, "children": []}]}]
    assert "This run has no per-worker trees." in to_html_report(trainer_tree)


def test_nan_and_infinite_gauges_are_shown_by_name(run_with_nan_readings):
    page = to_html_report(run_with_nan_readings)
    assert '<td class="name">loss</td><td class="number">NaN</td><td class="number">0.1</td>' in page


def test_nan_and_infinite_counter_samples_are_left_off_the_chart_and_counted(run_with_nan_readings):
    page = to_html_report(run_with_nan_readings)
    assert "trainer: loss (min 0.5, max 0.5, last Infinity" in page
    assert "2 NaN or infinite samples not drawn" in page
    assert "nan" not in re.findall(r'points="([^"]*)"', page)[-1].lower()
