"""The Class page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import DISPLAY, PageSpec

# The class in the room: a join link (?join=CODE) and the lecturer's private one (?lead=CODE&key=...).
SPEC = PageSpec(
    "app_pages/class/class.py",
    "Class",
    ":material/groups:",
    DISPLAY,
    own=frozenset({"join", "lead", "key"}),
    presented=False,
)
