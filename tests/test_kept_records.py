"""The pages' figures rebuilt from the kept records (scripts.results_tables, orchestration.kept_records): the pages
agree with the records now, a figure edited by hand or a record changed is found, and the figures come from the
per-episode values, not from what a file recorded as its mean."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.estimates import bootstrap_interval, format_mean_interval, wilson_interval
from orchestration.kept_records import (
    BLOCK_BEGIN,
    BLOCK_END,
    RecordError,
    check_pages,
    load_manifest,
    rebuild,
    rebuild_all,
    seeds_table,
)

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "docs" / "records"


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scripts.results_tables", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_every_page_agrees_with_the_kept_records() -> None:
    assert check_pages(REPO) == []
    done = _script("--check")
    assert done.returncode == 0, done.stderr
    assert "every page agrees with the records" in done.stdout


def _copy_repo(tmp_path: Path) -> Path:
    """The pages and the records in a folder of their own, to be edited."""
    (tmp_path / "docs").mkdir()
    shutil.copytree(RECORDS, tmp_path / "docs" / "records")
    for page in {p for f in rebuild_all(RECORDS) for p in f.spec.pages + f.spec.quoted_in}:
        shutil.copy(REPO / page, tmp_path / page)
    return tmp_path


def test_a_figure_edited_by_hand_in_the_prose_or_the_table_is_found(tmp_path) -> None:
    repo = _copy_repo(tmp_path)
    page = repo / "docs" / "results.md"
    text = page.read_text()
    fighter = next(f for f in rebuild_all(RECORDS) if f.spec.id == "fighter_alone_kills_rate")
    assert fighter.text == "11.3 [10.2, 12.5]"
    page.write_text(text.replace("11.3 [10.2, 12.5]", "12.3 [10.2, 12.5]"))  # the table's too: named below
    problems = check_pages(repo)
    assert any("fighter_alone_kills_rate" in p and "quotes no '11.3 [10.2, 12.5]'" in p for p in problems), problems
    # inside a generated table: the table is named
    page.write_text(text.replace("| 11.3 [10.2, 12.5] |", "| 11.4 [10.2, 12.5] |", 1))
    assert any("the table 'kept_figures' is not what the records give" in p for p in check_pages(repo))
    done = _script("--check", "--repo", str(repo), "--records", str(repo / "docs" / "records"))
    assert done.returncode == 1 and "kept_figures" in done.stderr
    # --write puts the records' table back, and the check passes again
    done = _script("--write", "--repo", str(repo), "--records", str(repo / "docs" / "records"))
    assert done.returncode == 0, done.stderr
    assert page.read_text() == text and check_pages(repo) == []


def test_a_changed_record_changes_the_figure_and_the_check_fails(tmp_path) -> None:
    repo = _copy_repo(tmp_path)
    path = repo / "docs" / "records" / "fighter_2026-12-02" / "fighter_alone_skill_report.json.gz"
    report = json.loads(gzip.decompress(path.read_bytes()))
    episodes = report["skills"]["fighter"]["policies"]["trained"]["per_episode"]
    for e in episodes[:50]:
        e["measures"]["kills_per_1000_steps"] = 0.0
    path.write_bytes(gzip.compress(json.dumps(report).encode()))
    problems = check_pages(repo)
    assert any("fighter_alone_kills_rate" in p for p in problems), problems


def _skill_report(tmp_path: Path, values: list[float], recorded_mean: float) -> str:
    report = {"env_steps": 3_000_000, "skills": {"descender": {"policies": {"trained": {
        "measures": {"levels_descended": {"mean": recorded_mean, "ci95": [0.0, 9.0]}},
        "per_episode": [{"measures": {"levels_descended": v}} for v in values]}}}}}
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(json.dumps(report).encode()))
    return "r.json.gz"


def _manifest(tmp_path: Path, entries: str) -> None:
    (tmp_path / "figures.toml").write_text(entries)


HELD = '''
[[figure]]
id = "{id}"
quantity = "q"
kind = "held_alone"
record = "r.json.gz"
skill = "descender"
policy = "trained"
measure = "levels_descended"
pages = ["p.md"]
group = "g"
seed = {seed}
role = "descender_alone"
'''


def test_a_held_alone_figure_is_the_mean_and_bootstrap_interval_of_the_episodes(tmp_path) -> None:
    values = [0.0] * 180 + [1.0] * 15 + [2.0] * 5
    _skill_report(tmp_path, values, recorded_mean=0.9)  # a recorded mean that is wrong is not what is quoted
    _manifest(tmp_path, HELD.format(id="a", seed=1))
    (figure,) = rebuild_all(tmp_path)
    lo, hi = bootstrap_interval(values)
    assert figure.mean == pytest.approx(0.125) and figure.text == format_mean_interval(0.125, lo, hi)
    assert figure.text.startswith("0.125 [") and figure.episodes == 200 and figure.env_steps == 3_000_000


def _evaluation(tmp_path: Path, reached: list[bool], window: int) -> str:
    _evaluation_with(tmp_path, [{"release": {"reached": r}} for r in reached], window)
    return "e.json.gz"


COMPOSED = '''
[[figure]]
id = "g"
quantity = "gnomish"
kind = "composed"
record = "e.json.gz"
pages = ["p.md"]
'''


def test_a_composed_figure_is_the_release_window_with_the_count_over_all_episodes_beside(tmp_path) -> None:
    reached = [True] * 10 + [False] * 1990 + [True] * 3 + [False] * 997  # 13 of 3,000; 3 of the last 1,000
    _evaluation(tmp_path, reached, window=1000)
    _manifest(tmp_path, COMPOSED)
    (figure,) = rebuild_all(tmp_path)
    lo, hi = wilson_interval(3, 1000)
    assert figure.mean == pytest.approx(0.003)
    assert figure.text == f"0.3% [{100 * lo:.2g}%, {100 * hi:.2g}%]"
    assert figure.basis == "over the release's window of the last 1,000 episodes"
    assert figure.beside == "(13 of 3,000 over all episodes: 0.43%)"
    # the two rates differ but would print alike (1.9% and 1.89%): the count over all episodes gets a third digit
    _evaluation(tmp_path, [True] * 6 + [False] * 317 + [True] * 19 + [False] * 981, window=1000)
    (figure,) = rebuild_all(tmp_path)
    assert figure.text.startswith("1.9% [") and figure.beside == "(25 of 1,323 over all episodes: 1.89%)"
    # fewer than the window: all of them, and nothing beside
    _evaluation(tmp_path, [True] + [False] * 99, window=1000)
    (figure,) = rebuild_all(tmp_path)
    assert figure.basis == "over the window of all 100 episodes" and figure.beside == ""
    assert figure.text.startswith("1% [")


def test_the_table_of_seeds_gives_each_seed_and_the_spread(tmp_path) -> None:
    _skill_report(tmp_path, [0.0] * 190 + [1.0] * 10, recorded_mean=0.05)
    _manifest(tmp_path, HELD.format(id="a", seed=1) + HELD.format(id="b", seed=3))
    figures = rebuild_all(tmp_path)
    table = seeds_table(figures, "g")
    assert "| 1 | 3,000,000 | 0.05 [" in table and "| 3 | 3,000,000 | 0.05 [" in table
    assert "| over the seeds (2 of 3) | | mean 0.05 (range 0.05 to 0.05, 2 seeds) |" in table
    _manifest(tmp_path, HELD.format(id="a", seed=1))
    assert "0.05 (1 seed: no spread yet)" in seeds_table(rebuild_all(tmp_path), "g")


@pytest.mark.parametrize("entries, says", [
    (HELD.format(id="a", seed=1).replace('kind = "held_alone"', 'kind = "guess"'), "kind 'guess' is not one of"),
    (HELD.format(id="a", seed=1).replace('measure = "levels_descended"\n', ""), "a held_alone figure needs measure"),
    (HELD.format(id="a", seed=1) + HELD.format(id="a", seed=2), "the id a appear more than once"),
    (HELD.format(id="a", seed=1).replace("seed = 1\n", ""), "needs group, seed and role together"),
    (HELD.format(id="a", seed=1).replace('role = "descender_alone"', 'role = "x"\nextra = 1'), "unknown field extra"),
    ("x = [", "not valid TOML"),
])
def test_a_bad_manifest_entry_is_named(tmp_path, entries, says) -> None:
    _skill_report(tmp_path, [0.0, 1.0], 0.5)
    _manifest(tmp_path, entries)
    with pytest.raises(RecordError, match=str(tmp_path / "figures.toml")) as exc:
        load_manifest(tmp_path)
    assert says in str(exc.value)


def test_a_missing_record_is_one_line_and_exit_2(tmp_path) -> None:
    _manifest(tmp_path, COMPOSED)
    with pytest.raises(RecordError, match="e.json.gz: the record is missing"):
        rebuild(load_manifest(tmp_path)[0], tmp_path)
    done = _script("--records", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("the record is missing")


def test_write_into_a_page_without_its_markers_names_the_page_and_writes_nothing(tmp_path) -> None:
    _evaluation(tmp_path, [False] * 10, window=1000)
    _manifest(tmp_path, COMPOSED)
    (tmp_path / "p.md").write_text("# a page\n0% [0%, 28%]\n")
    done = _script("--write", "--records", str(tmp_path), "--repo", str(tmp_path))
    assert done.returncode == 2 and "p.md: no place for the table 'kept_figures'" in done.stderr
    assert (tmp_path / "p.md").read_text() == "# a page\n0% [0%, 28%]\n"
    begin, end = BLOCK_BEGIN.format(name="kept_figures"), BLOCK_END.format(name="kept_figures")
    (tmp_path / "p.md").write_text(f"# a page\n0% [0%, 28%]\n{begin}\n{end}\n")
    assert _script("--write", "--records", str(tmp_path), "--repo", str(tmp_path)).returncode == 0
    assert "| gnomish | 0% [0%, 28%] | over the window of all 10 episodes |" in (tmp_path / "p.md").read_text()
    assert check_pages(tmp_path, tmp_path) == []


def test_the_spread_of_a_success_rate_is_in_percent(tmp_path) -> None:
    _evaluation(tmp_path, [True] * 3 + [False] * 997, window=1000)  # 0.3%
    entry = COMPOSED.replace('pages = ["p.md"]', 'pages = ["p.md"]\ngroup = "g"\nrole = "gnomish_composed"')
    _manifest(tmp_path, entry.replace('id = "g"', 'id = "a"') + "seed = 1\n" + entry.replace('id = "g"', 'id = "b"')
              + "seed = 2\n")
    table = seeds_table(rebuild_all(tmp_path), "g")
    assert "| over the seeds (2 of 3) | | mean 0.3% (range 0.3% to 0.3%, 2 seeds) |" in table, table


def _evaluation_with(tmp_path: Path, episodes: list[dict], window: int) -> None:
    n = len(episodes)
    for i, e in enumerate(episodes):
        e["in_window"] = i >= n - window
    (tmp_path / "e.json.gz").write_bytes(gzip.compress(json.dumps({"per_episode": episodes}).encode()))


PER_EPISODE = '''
[[figure]]
id = "descents"
quantity = "stair descents per episode"
kind = "composed_mean"
record = "e.json.gz"
field = "release.descents"
pages = ["p.md"]

[[figure]]
id = "level1"
quantity = "never left level 1"
kind = "composed_share"
record = "e.json.gz"
field = "release.max_depth"
equals = 1
pages = ["p.md"]

[[figure]]
id = "killed"
quantity = "killed by a monster"
kind = "composed_share"
record = "e.json.gz"
field = "ending"
equals = "killed by a monster"
pages = ["p.md"]
'''


def test_per_episode_figures_of_an_evaluation_are_read_over_the_release_window(tmp_path) -> None:
    # 500 episodes before the window that went down 5 times each and were all killed: not counted
    before = [{"release": {"descents": 5, "max_depth": 6}, "ending": "killed by a monster"}] * 500
    window = ([{"release": {"descents": 0, "max_depth": 1}, "ending": "killed by a monster"}] * 700
              + [{"release": {"descents": 2, "max_depth": 3}, "ending": "starved"}] * 300)
    _evaluation_with(tmp_path, [dict(e) for e in before + window], window=1000)
    _manifest(tmp_path, PER_EPISODE)
    descents, level1, killed = rebuild_all(tmp_path)
    lo, hi = bootstrap_interval([0.0] * 700 + [2.0] * 300)
    assert descents.mean == pytest.approx(0.6) and descents.text == format_mean_interval(0.6, lo, hi)
    assert descents.basis == "over the release's window of the last 1,000 episodes"
    lo, hi = wilson_interval(700, 1000)
    assert level1.mean == pytest.approx(0.7) and level1.text == f"70% [{100 * lo:.0f}%, {100 * hi:.0f}%]"
    assert killed.mean == pytest.approx(0.7)
    _manifest(tmp_path, PER_EPISODE.replace('field = "release.descents"', 'field = "release.stairs"'))
    with pytest.raises(RecordError, match="no per-episode 'release.stairs'"):
        rebuild_all(tmp_path)


SECTIONS = '''
[[quoted_section]]
page = "p.md"
heading = "## Verdict"
'''


def test_a_quoted_section_holds_kept_figures_only(tmp_path) -> None:
    _evaluation(tmp_path, [True] * 10 + [False] * 1990 + [True] * 3 + [False] * 997, window=1000)
    _manifest(tmp_path, COMPOSED.replace('pages = ["p.md"]', 'pages = ["p.md"]\nquoted_in = ["q.md"]') + SECTIONS)
    (figure,) = rebuild_all(tmp_path)
    begin, end = BLOCK_BEGIN.format(name="kept_figures"), BLOCK_END.format(name="kept_figures")
    page = (f"# page\n## Verdict\nGnomish: **{figure.text}** over the window.\n"
            "```bash\n# a command, not a heading\n```\nAlso 0.225\n  [0.15, 0.31], a run whose record was not kept (wrapped).\n"
            f"## Later\nThe history may quote 2.3% [1.5%, 3.4%].\n{begin}\n{end}\n")
    (tmp_path / "p.md").write_text(page)
    (tmp_path / "q.md").write_text(f"a README quoting {figure.text}\n")
    assert _script("--write", "--records", str(tmp_path), "--repo", str(tmp_path)).returncode == 0
    problems = check_pages(tmp_path, tmp_path)
    assert problems == ["p.md, '## Verdict': '0.225 [0.15, 0.31]' is not a kept figure of this page (keep its "
                        "record and add it to figures.toml, or take it out of this section)"]
    # the figure taken out of the verdict: nothing left to say
    (tmp_path / "p.md").write_text((tmp_path / "p.md").read_text().replace("Also 0.225\n  [0.15, 0.31], a", "A"))
    assert check_pages(tmp_path, tmp_path) == []
    # a count over all episodes that no kept figure gives, beside a kept rate
    text = (tmp_path / "p.md").read_text()
    (tmp_path / "p.md").write_text(text.replace("over the window.", "over the window (13 of 3,000 over all episodes: "
                                                 "0.43%), (9 of 99 over all episodes: 9.1%)."))
    assert check_pages(tmp_path, tmp_path) == ["p.md, '## Verdict': '9 of 99 over all episodes: 9.1%' is not the "
                                               "count over all episodes of a kept figure of this page"]
    (tmp_path / "p.md").write_text(text)
    # a page that quotes the figure in its text only: it must hold it, with no table of its own
    (tmp_path / "q.md").write_text("a README quoting 0.4% [0.1%, 0.9%]\n")
    assert any(p.startswith("q.md: quotes no") for p in check_pages(tmp_path, tmp_path))
    # a heading that is not there is named
    _manifest(tmp_path, COMPOSED + SECTIONS.replace("## Verdict", "## Shown"))
    assert check_pages(tmp_path, tmp_path) == ["p.md: no heading '## Shown' (a quoted section of figures.toml)"]


def test_every_row_of_the_table_of_figures_to_quote_links_to_its_record() -> None:
    """docs/results.md's "One figure per quantity": each row's last cell links into docs/records (a row for what no
    kept run measured says so, and links nothing)."""
    from orchestration.kept_records import section_text
    body = section_text((REPO / "docs" / "results.md").read_text(encoding="utf-8"), "## One figure per quantity")
    assert body is not None
    rows = [line for line in body.splitlines() if line.startswith("| ") and not line.startswith("| quantity |")]
    rows = [r for r in rows if not r.startswith("|---")]
    table = [r for r in rows if r.count("|") == 7]  # the hand-written table's six columns, not the generated one
    assert len(table) >= 10
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[1].startswith("not evaluated"):
            assert "](" not in cells[5], row
            continue
        assert "](records/" in cells[5], f"no record linked: {row[:120]}"
        for target in re.findall(r"\]\((records/[^)#]+)", cells[5]):
            assert (REPO / "docs" / target).is_file(), target
