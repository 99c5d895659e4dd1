"""The wire: response bytes and recorded files → provider events."""
