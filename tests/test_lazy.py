"""The public names of a package re-exported on first use from its TYPE_CHECKING imports."""

import fieldcheck.metrics
import fieldcheck.runner


def test_the_type_checking_imports_are_the_public_names() -> None:
    """``__all__`` is read from the ``if TYPE_CHECKING:`` block: every name there, each resolved
    from its own module (an empty ``__all__`` would make the resolving tests pass vacuously)."""
    assert len(fieldcheck.metrics.__all__) == 113 and len(fieldcheck.runner.__all__) == 26
    from fieldcheck.metrics._programs import parse_program
    from fieldcheck.runner._run import RunSpec

    assert fieldcheck.metrics.parse_program is parse_program
    assert fieldcheck.runner.RunSpec is RunSpec
    assert "parse_program" in dir(fieldcheck.metrics) and "nope" not in dir(fieldcheck.runner)


def test_eager_names_are_public_and_other_packages_names_resolve() -> None:
    """``core`` imports its pipeline eagerly and its executors lazily: both are in ``__all__``;
    ``jsoneval`` re-exports ``metrics.RqsWeights`` through its TYPE_CHECKING block."""
    import fieldcheck.core
    import fieldcheck.jsoneval
    import fieldcheck.metrics

    eager = {
        name
        for name, value in vars(fieldcheck.core).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("fieldcheck.core.")
    }
    assert len(eager) > 20 and eager <= set(fieldcheck.core.__all__)
    assert all(hasattr(fieldcheck.jsoneval, name) for name in fieldcheck.jsoneval.__all__)
    assert len(fieldcheck.jsoneval.__all__) > 50
    assert {"score", "run_map", "Executor"} <= set(fieldcheck.core.__all__)
    assert fieldcheck.jsoneval.RqsWeights is fieldcheck.metrics.RqsWeights
    from fieldcheck.jsoneval._evaluate import evaluate

    assert fieldcheck.jsoneval.evaluate is evaluate
