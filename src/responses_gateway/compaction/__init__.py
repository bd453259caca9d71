"""Compaction: long conversations summarised by the upstream model into one sealed `compaction` item.

keys.py seals and opens the items; history.py turns them back into plain text for the adapters;
step.py runs a summary inside a response. See docs/compaction.md.
"""
