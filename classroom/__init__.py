"""The class in the room: a lecturer leads, students follow and answer. No Streamlit here: the rules of a
class (classes.py) over a store that one server or many replicas share (store.py)."""
