"""One router per area: ``json`` (evaluation), ``config`` (saved configuration), ``pages``."""
