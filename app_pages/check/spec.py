"""The Check page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import EVERYTHING, PageSpec

# Check your attention: the sidebar's settings make the inputs a student's implementation runs on.
SPEC = PageSpec("app_pages/check/check.py", "Check", ":material/fact_check:", EVERYTHING, own=frozenset({"chk_step"}))
