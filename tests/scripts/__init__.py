"""Game scripts the tests import as a game imports its own: modules that
declare their classes at module level, before any runtime exists
(``from scripts.arena import Guard``; ``tests/`` is on the path)."""
