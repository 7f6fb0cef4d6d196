"""Private helpers shared by every layer: errors that name their place, JSONL reading, signatures."""
