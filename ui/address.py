"""The address as Streamlit's bound widgets read it: the one room that reaches past Streamlit's public API.

A widget bound to the address (bind="query-params") takes its first value from the address as the session began,
and code may not write a bound value through st.query_params. Four things the app needs have no public call in
the pinned Streamlit (1.67): forgetting a refused link value, so that its widget takes its default; holding a
page's own choice in the address when a click's rerun arrived with the older one; opening a deck's view with its
own values, as a link would; which page a fragment's run is of (ui.pages.timed_fragment); and a widget's default,
which a deck's view sets a choice it does not name back to (ui/decks.py). Streamlit does the first three itself
after a page change, through the calls below, and tests/test_app.py and the browser tests check them on the pinned
version. Nothing else in the app imports streamlit.runtime (tests/test_house.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx


def page_run() -> str:
    """The page this run is of, as Streamlit names it (its script's hash): for a fragment's run, the page the
    browser named when it asked for it ("" outside a script run)."""
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def forget_initial_values() -> None:
    """Make the address a bound widget reads its first value from the address as it is now."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        with ctx.session_state.query_params() as params:
            params.set_initial_query_params_from_current()


def hold(key: str, wanted: str | None) -> None:
    """The address holds `wanted` at `key` (None: not there), and the page is told."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with ctx.session_state.query_params() as params:
        if params.to_dict().get(key) == wanted:
            return
        if wanted is None:
            params.discard_param_no_forward_msg(key)
        else:
            params.set_with_no_forward_msg(key, wanted)
        params._send_query_param_msg()  # the address, with it, to the page


def clear_bound() -> bool:
    """Clear the address (the bound values of the view before), leaving the page's embed options. False outside a
    script run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return False
    with ctx.session_state.query_params() as params:
        params.clear_with_no_forward_msg(preserve_embed=True)
    return True


def seed(values: Mapping[str, str]) -> None:
    """Write `values` into the address as a link's, for the widgets drawn next to take as their first values."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        with ctx.session_state.query_params() as params:
            for key, value in values.items():
                params.set_with_no_forward_msg(key, value)
            params.set_initial_query_params_from_current()


def widget_default(key: str):
    """The default of the widget keyed `key`, as Streamlit's own record of it gives it (its deserializer, asked for no
    value); None where no such widget was drawn in this session, or outside a script run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    try:
        session = ctx.session_state._state
        metadata = session._new_widget_state.widget_metadata.get(session._get_widget_id(key))
    except AttributeError:  # another Streamlit's internals: no default known (the choice is then only forgotten)
        return None
    return None if metadata is None else metadata.deserializer(None)
