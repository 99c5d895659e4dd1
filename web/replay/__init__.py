"""Replay: sessions paced through the assembler, their controls, and updates fanned out to viewers."""
