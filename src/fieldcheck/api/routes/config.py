"""``/api/config``: the saved strategies, thresholds and RQS weights; each section can be read,
replaced, imported from a JSON file and exported as one."""

import os
from typing import Annotated, Any

from fastapi import Body, File, UploadFile
from fastapi.responses import Response

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import dumps
from fieldcheck.api._body import ConfigBodyRoute, api_router
from fieldcheck.api._deps import Context
from fieldcheck.api._errors import INVALID, ApiError, error_responses
from fieldcheck.api._evaluation import parse_json_file
from fieldcheck.jsoneval import Section

router = api_router("/api/config", "config", ConfigBodyRoute)

# section (its URL part), download name, what the body is
_SECTIONS: tuple[tuple[Section, str, str], ...] = (
    (
        "strategies",
        "field_strategies.json",
        "field -> EXACT | FUZZY | SEMANTIC | IGNORE (values case-insensitive)",
    ),
    ("thresholds", "thresholds.json", "{fuzzy_threshold, semantic_threshold}, each in [0, 1]"),
    ("weights", "rqs_weights.json", "{accuracy, completeness, hallucination, safety}"),
)


def save_section(
    ctx: Context, section: Section, data: Any, *, file: str | None = None
) -> dict[str, Any]:
    """Validate and save; a bad value is a 422 with the CLI's one-line message."""
    try:
        return ctx.saved.put(section, data, file=file)
    except InputError as exc:
        raise ApiError.invalid(exc, field=exc.field or section) from None


def _add_section(section: Section, filename: str, shape: str) -> None:
    @router.get(f"/{section}", summary=f"The saved {section}")
    def get_section(ctx: Context) -> dict[str, Any]:
        return ctx.saved.get(section)

    @router.put(
        f"/{section}",
        summary=f"Replace the saved {section}",
        responses=error_responses({422: INVALID}),
    )
    def put_section(
        ctx: Context, body: Annotated[dict[str, Any], Body(description=shape)]
    ) -> dict[str, Any]:
        return save_section(ctx, section, body)

    @router.post(
        f"/{section}/import",
        summary=f"Replace the saved {section} from a JSON file",
        responses=error_responses({422: INVALID}),
    )
    def import_section(
        ctx: Context, file: Annotated[UploadFile, File(description=f"A JSON file: {shape}.")]
    ) -> dict[str, Any]:
        name = os.path.basename(file.filename or "") or "upload.json"
        try:  # read from its spooled copy; a bad file is a 422 naming ``file``
            data = parse_json_file(file.file.read(), name=name)
        except InputError as exc:
            raise ApiError.invalid(exc, field="file") from None
        return save_section(ctx, section, data, file=name)

    @router.get(
        f"/{section}/export",
        summary=f"The saved {section} as a JSON file",
        response_class=Response,
        responses={200: {"content": {"application/json": {}}}},
    )
    def export_section(ctx: Context) -> Response:
        return Response(
            dumps(ctx.saved.get(section), indent=True) + "\n",
            media_type="application/json",
            headers={"content-disposition": f'attachment; filename="{filename}"'},
        )


for _section in _SECTIONS:
    _add_section(*_section)
