"""The house rules (issue 40), checked on the code as it is: rooms of one purpose, small enough to read, that import
each other one way only and through public names. Each rule is tried on a planted breach first, so that a rule
that could not fail is seen."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("attention_core", "attention_explorer", "classroom", "figures", "ui")  # and app_pages/, the pages
MODULE_LINES_MOST = 400
FUNCTION_LINES_MOST = 80
PAGE_TOP_LEVEL_MOST = 80  # a page is a main() and what it calls
FMT_SKIP_MOST = 30  # `# fmt: skip` only where a table reads better


def product_files() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return [*files, *sorted((ROOT / "app_pages").rglob("*.py")), ROOT / "app.py"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def long_modules(files: dict[str, str]) -> list[str]:
    return [f"{name}: {len(text.splitlines())} lines" for name, text in files.items()
            if len(text.splitlines()) > MODULE_LINES_MOST]  # fmt: skip


def long_functions(files: dict[str, str]) -> list[str]:
    found = []
    for name, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES_MOST:
                    found.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    return found


def imports_of(name: str, text: str, known: set[str]) -> list[tuple[str, str, int]]:
    """(module imported, name imported or "", line) for every import of a product module, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:  # a module: `from ui import slides`
                    found.append((f"{node.module}.{alias.name}", "", node.lineno))
                elif node.module in known:
                    found.append((node.module, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, "", node.lineno) for alias in node.names if alias.name in known]
    return found


def private_imports(files: dict[str, str]) -> list[str]:
    """`from a import _b`: a module's private name used by another."""
    known = set(files)
    return [f"{name}:{line} imports {source}.{what}" for name, text in files.items()
            for source, what, line in imports_of(name, text, known)
            if what.startswith("_") and not what.startswith("__")]  # fmt: skip


def cycles(files: dict[str, str]) -> list[list[str]]:
    """Groups of modules that import each other, round (Tarjan's strongly connected components). A package
    importing its own modules (its __init__ re-exporting them) is not a cycle."""
    known = set(files)
    graph = {name: {source for source, _, _ in imports_of(name, text, known)} - {name} for name, text in files.items()}
    for name in graph:  # a module importing its package needs only the package's own modules, which it is among
        graph[name] = {other for other in graph[name] if not name.startswith(other + ".")}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


# What a room may import, by the first part of the module's name: the core computes (no Streamlit, no Plotly),
# the figures draw (no Streamlit), and neither knows the app's pages; ui/ imports no page either: the pages are
# handed to its registry (ui/pages.py PAGES, filled by app_pages/__init__.py) and it reads them there.
FORBIDDEN = {
    "attention_core": ("streamlit", "plotly", "figures", "ui", "app_pages", "classroom"),
    "classroom": ("streamlit", "plotly", "figures", "ui", "app_pages"),
    "figures": ("streamlit", "ui", "app_pages", "classroom"),
    "attention_explorer": ("streamlit", "ui", "app_pages", "classroom"),  # the notebook's: no Streamlit
    "ui": ("app_pages",),
}
# Streamlit's public API: `streamlit`, its components and its testing API (AppTest, which runs the app without a
# browser: a deck's file is made so). ui/address.py is the one room that reaches past it: a bound widget's address
# has no public call (its docstring says which and why).
STREAMLIT_PUBLIC = ("streamlit", "streamlit.components.v1", "streamlit.components.v2", "streamlit.testing.v1")
STREAMLIT_PRIVATE_ALLOWED = {"ui.address"}
COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b")  # the core computes: how a thing is drawn lives with the figures, or
# in a variant's look.py (its folder declares how it is drawn, as data the figures read)
VARIANT_LOOK = re.compile(r"^attention_core\.variants\.\w+\.look$")
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+|\bissue #\d+", re.IGNORECASE)


def all_imports(text: str) -> list[tuple[str, int]]:
    """(module, line) of every import, of any package, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return found


def layer_breaches(files: dict[str, str]) -> list[str]:
    found = []
    for name, text in files.items():
        room = name.split(".")[0]
        for module, line in all_imports(text):
            banned = any(module == other or module.startswith(other + ".") for other in FORBIDDEN.get(room, ()))
            if banned:
                found.append(f"{name}:{line} imports {module}")
    return found


def private_streamlit(files: dict[str, str]) -> list[str]:
    return [f"{name}:{line} imports {module}" for name, text in files.items() if name not in STREAMLIT_PRIVATE_ALLOWED
            for module, line in all_imports(text)
            if module.split(".")[0] == "streamlit" and module not in STREAMLIT_PUBLIC]  # fmt: skip


def bare_fragments(files: dict[str, str]) -> list[str]:
    """st.fragment outside ui/pages.py: a part that runs on a clock must be a timed_fragment, whose run goes back to
    the page drawn when the browser asked for it from the page before a switch (docs/design-notes.md)."""
    return [f"{name}:{node.lineno} uses st.fragment" for name, text in files.items() if name != "ui.pages"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Attribute) and node.attr == "fragment"
            and isinstance(node.value, ast.Name) and node.value.id == "st"]  # fmt: skip


def private_libraries(files: dict[str, str]) -> list[str]:
    """A library's private module (`_plotly_utils`, `torch._dynamo`): it may change in any release without a word.
    Streamlit's, in ui/address.py alone, is private_streamlit's."""
    ours = {name.split(".")[0] for name in files}
    found = []
    for name, text in files.items():
        for module, line in all_imports(text):
            parts = module.split(".")
            private = any(part.startswith("_") and not part.startswith("__") for part in parts)
            if private and parts[0] not in ours and parts[0] != "streamlit":
                found.append(f"{name}:{line} imports {module}")
    return found


def one_page_modules(files: dict[str, str]) -> list[str]:
    """ui modules that one page alone uses (imported only from inside that page's folder): they belong there."""
    known = set(files)
    users: dict[str, set[str]] = {name: set() for name in files if name.startswith("ui.")}
    for name, text in files.items():
        for source, _, _ in imports_of(name, text, known):
            if source in users and source != name:
                users[source].add(".".join(name.split(".")[:2]) if name.startswith("app_pages.") else name)
    return [f"{name}: only {next(iter(used))}" for name, used in users.items()
            if len(used) == 1 and next(iter(used)).startswith("app_pages.")]  # fmt: skip


def core_colours(files: dict[str, str]) -> list[str]:
    return [f"{name}:{number}" for name, text in files.items()
            if name.split(".")[0] == "attention_core" and not VARIANT_LOOK.match(name)
            for number, line in enumerate(text.splitlines(), start=1) if COLOUR.search(line)]  # fmt: skip


def issue_numbers(files: dict[str, str]) -> list[str]:
    return [f"{name}:{number}: {line.strip()[:80]}" for name, text in files.items()
            for number, line in enumerate(text.splitlines(), start=1) if ISSUE_NUMBER.search(line)]  # fmt: skip


def constants_named_twice(files: dict[str, str]) -> list[str]:
    """A module-level CONSTANT assigned a second time: the second hides the first from every reader above it (a
    helper's script once took a new helper's name and three tests read the wrong one)."""
    found = []
    for name, text in files.items():
        seen: dict[str, int] = {}
        for node in ast.parse(text).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    if target.id in seen:
                        found.append(f"{name}:{node.lineno} {target.id} (first at {seen[target.id]})")
                    seen.setdefault(target.id, node.lineno)
    return found


def is_page_script(name: str) -> bool:
    """app_pages.<page>.<page>: a page's script, named as its folder."""
    parts = name.split(".")
    return len(parts) == 3 and parts[0] == "app_pages" and parts[1] == parts[2]


def page_top_level(text: str) -> int:
    """Lines of a page outside its functions, classes, imports and docstring."""
    return sum(node.end_lineno - node.lineno + 1 for node in ast.parse(text).body
               if not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom)
               and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)))  # fmt: skip


@pytest.fixture(scope="module")
def product() -> dict[str, str]:
    return {module_name(path): path.read_text() for path in product_files()}


PLANTED = {  # a module that breaks every rule once
    "fake.big": "x = 1\n" * (MODULE_LINES_MOST + 1),
    "fake.long": "def f():\n" + "    x = 1\n" * FUNCTION_LINES_MOST,
    "fake.a": "from fake.b import _hidden\n",
    "fake.b": "def g():\n    from fake.a import thing\n",
    "fake.twice": "DRAWN = 1\nLIMIT: int = 2\nDRAWN = 3\nlower = 4\nlower = 5\n",
    "attention_core.fake": "import streamlit as st\nfrom figures.style import Style\nCOLOUR = '#1a7f5a'\n",
    "attention_core.variants.fake.look": "LOOK = Look('#1a7f5a')\n",  # a variant's colour, where it belongs
    "attention_core.variants.fake.compute": "COLOUR = '#1a7f5a'\n",  # but not beside what it computes
    "figures.fake": "def f():\n    import streamlit\n",
    "ui.fake": "from streamlit.runtime.scriptrunner import get_script_run_ctx\n"
    "from app_pages.real_model.views import x\nfrom app_pages.real_model.spec import SPEC\n"
    "from app_pages import PAGES\n# the masks (issue 43)\n@st.fragment(run_every=1)\ndef poll():\n    pass\n",
    "ui.lonely": "x = 1\n",
    "figures.encoded": "from _plotly_utils.utils import is_skipped_key\n",
    "app_pages.real_model.real_model": "from ui.lonely import x\n",
    "app_pages.real_model.views": "from ui.lonely import x\n",
}


def test_every_rule_finds_its_planted_breach():
    assert long_modules(PLANTED) == [f"fake.big: {MODULE_LINES_MOST + 1} lines"]
    assert long_functions(PLANTED) == [f"fake.long:1 f: {FUNCTION_LINES_MOST + 1} lines"]
    assert private_imports(PLANTED) == ["fake.a:1 imports fake.b._hidden"]
    assert cycles(PLANTED) == [["fake.a", "fake.b"]]  # the import inside a function counts
    assert page_top_level("import x\n\nx.y()\nz = 1\n\n\ndef main():\n    pass\n") == 2
    assert layer_breaches(PLANTED) == [
        "attention_core.fake:1 imports streamlit",
        "attention_core.fake:2 imports figures.style",
        "figures.fake:2 imports streamlit",
        "ui.fake:2 imports app_pages.real_model.views",
        "ui.fake:3 imports app_pages.real_model.spec",
        "ui.fake:4 imports app_pages",
    ]
    assert private_streamlit(PLANTED) == ["ui.fake:1 imports streamlit.runtime.scriptrunner"]
    assert bare_fragments(PLANTED) == ["ui.fake:6 uses st.fragment"]
    assert private_libraries(PLANTED) == ["figures.encoded:1 imports _plotly_utils.utils"]
    assert one_page_modules(PLANTED) == ["ui.lonely: only app_pages.real_model"]
    assert issue_numbers(PLANTED) == ["ui.fake:5: # the masks (issue 43)"]
    assert core_colours(PLANTED) == ["attention_core.fake:3", "attention_core.variants.fake.compute:1"]
    assert constants_named_twice(PLANTED) == ["fake.twice:3 DRAWN (first at 1)"]


def test_no_module_names_a_constant_twice(product):
    """The product's modules and the tests' (a test module's helper read a constant a later line replaced)."""
    tests = {f"tests.{path.stem}": path.read_text() for path in sorted((ROOT / "tests").glob("*.py"))}
    assert len(tests) > 30
    assert constants_named_twice(product | tests) == []


def test_no_product_module_is_over_400_lines(product):
    assert len(product) > 50  # it read the modules
    assert long_modules(product) == []


def test_no_function_is_over_80_lines(product):
    assert long_functions(product) == []


def test_modules_use_each_others_public_names_only(product):
    assert private_imports(product) == []


def test_no_two_modules_import_each_other(product):
    assert cycles(product) == []


def test_the_core_computes_the_figures_draw_and_neither_knows_the_pages(product):
    assert layer_breaches(product) == []
    assert core_colours(product) == []  # a variant's colour is in its folder's look.py


def test_streamlit_is_used_through_its_public_api(product):
    assert private_streamlit(product) == []
    assert private_libraries(product) == []  # nor any other library's private modules
    assert not (ROOT / "pages").exists()  # Streamlit's older multipage mode starts for a folder of that name


def test_every_part_that_runs_on_a_clock_goes_back_to_the_page_drawn(product):
    assert bare_fragments(product) == []


def test_ui_holds_what_pages_share_and_each_page_its_own_parts(product):
    from app_pages import FOLDERS

    assert one_page_modules(product) == []
    folders = {path.name for path in (ROOT / "app_pages").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders == set(FOLDERS)
    assert all(
        (ROOT / "app_pages" / folder / name).is_file() for folder in FOLDERS for name in (f"{folder}.py", "spec.py")
    )


def test_comments_give_reasons_not_issue_numbers(product):
    assert issue_numbers(product) == []


def test_a_page_is_a_main_and_what_it_calls(product):
    pages = {name: text for name, text in product.items() if is_page_script(name)}
    assert len(pages) >= 9
    assert {
        name: page_top_level(text) for name, text in pages.items() if page_top_level(text) > PAGE_TOP_LEVEL_MOST
    } == {}
    assert all("\ndef main() -> None:" in text and text.rstrip().endswith("main()") for text in pages.values())


def test_the_formatter_is_kept_away_only_from_tables(product):
    skips = sum(text.count("# fmt: skip") for text in product.values())
    assert skips <= FMT_SKIP_MOST, f"{skips} `# fmt: skip` in the product code"


def mutants_module():
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
    mutants = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = mutants
    spec.loader.exec_module(mutants)
    return mutants


def test_every_planted_mutant_still_finds_its_line():
    """scripts/mutants.py plants each bug by replacing a line it names: after a module moves or is reformatted,
    each must still occur exactly once where the mutant says (else `make mutants` plants nothing)."""
    mutants = mutants_module()
    assert len(mutants.MUTANTS) >= 20
    lost = [f"{m.name}: {m.path} has {(ROOT / m.path).read_text().count(m.before)} of {m.before!r}"
            for m in mutants.MUTANTS
            if not (ROOT / m.path).exists() or (ROOT / m.path).read_text().count(m.before) != 1]  # fmt: skip
    assert lost == []


def stale_rows(mutants, report: str, root: Path = ROOT) -> list[str]:
    """The mutants whose row in the report is missing, or says another line than the one their change starts on
    now: what they caught was caught on other code."""
    said = {}
    for line in report.splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) >= 7 and not line.startswith(("| mutant", "|---")):
            said[cells[0][2:]] = cells[2]
    stale = []
    for m in mutants.MUTANTS:
        now = f"`{m.path}:{mutants.line_of(m, root)}`"
        if said.get(m.name) != now:
            stale.append(f"{m.name}: the report says {said.get(m.name, 'nothing')}, it is at {now}")
    return stale


def test_the_mutation_report_ran_on_every_mutant_where_its_line_is_now(tmp_path):
    """docs/mutants.md has a row for every mutant, at the line its change starts on now: a mutant added, or a line
    moved by an edit above it, is run again (`scripts/mutants.py --only WORDS`) before its catch is reported. The
    rule is tried first on a copy of a planted module with a line added above its mutant's."""
    mutants = mutants_module()
    report = (ROOT / "docs" / "mutants.md").read_text()
    one = mutants.MUTANTS[0]
    (tmp_path / one.path).parent.mkdir(parents=True)
    (tmp_path / one.path).write_text("# a line above\n" + (ROOT / one.path).read_text())
    moved = [row for row in stale_rows(mutants, report, tmp_path) if row.startswith(one.name + ":")]
    assert moved, "a moved line was not seen"
    assert stale_rows(mutants, report) == []


def test_a_title_is_its_parts_never_its_spaces():
    from figures.heatmap import Panel
    from figures.style import Title

    assert Title("scores", "Q·Kᵀ", "[4x4]").text == "scores = Q·Kᵀ  [4x4]"
    assert Panel([[0.0]], "weights").title == Title("weights")
    with pytest.raises(ValueError, match="Title"):
        Panel([[0.0]], "scores  [4x4]")


def test_the_apps_settings_offer_no_way_off_the_machine():
    """Nothing leaves the machine: no usage statistics, and a bug's error box without Streamlit's "Ask Google" and
    "Ask ChatGPT" links (shown on localhost by default: a lecturer's own laptop). The option is one this Streamlit
    knows (a renamed one would be ignored without a word)."""
    import tomllib

    from streamlit import config

    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert settings["client"]["showErrorLinks"] is False and settings["browser"]["gatherUsageStats"] is False
    assert {"showErrorLinks", "showErrorDetails"} <= set(config.get_options_for_section("client"))
