"""bench/README.md's table of figures is exactly what bench/report.py makes from the committed
bench/figures.json: a figure can't be edited into the README without being measured."""

import importlib.util

from harness import BENCH_DIR
from harness.catalogue import CATALOGUE
from harness.figures import FIGURES_PATH, read


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", BENCH_DIR / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_the_one_made_from_figures_json():
    report = load_report()
    readme = (BENCH_DIR / "README.md").read_text()
    assert report.splice(readme, report.table(read(FIGURES_PATH))) == readme


def test_every_catalogued_figure_has_a_row_and_every_entry_a_known_figure():
    report = load_report()
    body = read(FIGURES_PATH)
    rows = report.table(body).splitlines()[2:]
    assert len(rows) == len(CATALOGUE)
    assert set(body["figures"]) <= set(CATALOGUE)


def test_check_fails_on_a_table_edited_by_hand_until_the_report_rewrites_it(tmp_path, monkeypatch):
    # given a README whose table was edited by hand
    report = load_report()
    readme = tmp_path / "README.md"
    edited = (BENCH_DIR / "README.md").read_text().replace("| figure | latest |", "| figure | best ever |")
    readme.write_text(edited)
    monkeypatch.setattr(report, "README", readme)
    # when it is checked, then the check fails and changes nothing
    assert report.main(["--check"]) == 1
    assert readme.read_text() == edited
    # and once the report has rewritten it, the table is the file's again
    assert report.main([]) == 0
    assert report.main(["--check"]) == 0
    assert readme.read_text() == (BENCH_DIR / "README.md").read_text()
