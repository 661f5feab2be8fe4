"""The schema of ``params.yaml``: key names, types and component ids checked before any stage runs.

:func:`load_params` is the one way to read the file (every flow and the CLI commands that read
it call it): a typo in a key, a value of the wrong type, or a method/backend id that is not
registered is a one-line :class:`ParamsError` naming the key path and the closest valid key,
e.g. ``params.yaml: report.bootstrapp: unknown key (did you mean 'bootstrap'?)``.

The schema checks names and types only. Value bounds stay with the classes that own them
(``JudgeConfig``, ``IngestConfig``, ``RunnerConfig``, ...), and ``backend_options``,
``method_options`` and ``batch_options`` are free-form mappings that the backend, method and
batch submitter validate themselves. The keys of ``backend_options`` and a method's named
options are checked here too, against what the backend class and the method declare.

Most sections are derived from the dataclass their stage builds, so a new setting is one field
of that dataclass (:data:`STAGE_KEYS` lists the keys a stage reads beside it). Sections with no
dataclass in the library (``sample``, ``runner``, ``watch``) are declared here, one field per key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

if TYPE_CHECKING:
    from capjudge.records import JSONValue

from capjudge.util.credentials import refuse_credentials

log = logging.getLogger(__name__)


# libyaml's safe loader where PyYAML was built with it (the same documents, ~10x faster: the
# CLI reads params.yaml on every run), else the pure-Python one.
YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ParamsError(ValueError):
    """``params.yaml`` does not fit the schema (the message is one line, naming the key)."""


_STRICT = ConfigDict(extra="forbid", strict=True)


class SampleParams(BaseModel):
    """``sample``: the bundled synthetic sample suite."""

    model_config = _STRICT
    out: str = "data/sample"
    seed: int = 0
    images: int = 20


class RunnerParams(BaseModel):
    """``runner``: where the ingest, context and judge stages run their tasks.

    The same keys as ``flows.runner.RunnerConfig``, which checks their values (the flows layer
    sits above the library, so the library cannot derive from it).
    """

    model_config = _STRICT
    kind: str = "threads"
    address: str | None = None
    workers: int | None = None
    threads_per_worker: int = 1
    shared_dir: str | None = None


class WatchParams(BaseModel):
    """``watch``: the alert thresholds of ``capjudge watch``."""

    model_config = _STRICT
    alert_drop: float = 0.05
    max_low_mass_rate: float | None = 0.2


# Keys a stage reads itself, beside the fields of the dataclass it builds.
STAGE_KEYS: dict[str, dict[str, type]] = {
    "ingest": {"manifest": str, "media_root": str, "out": str},
    "aggregate": {"out": str},
    "validate": {"out": str},
    "report": {"out": str},
    # A judge entry: where it writes, the context stage it reads, a method's named settings
    # (JudgeConfig.from_params expands ``profile``) and a user template folder.
    "judges": {"out": str, "profile": str, "templates": str},
    "context_judges": {"out": str, "context": str, "profile": str, "templates": str},
    "contexts": {"method": str, "out": str},
}


def _model_of(name: str, cls: type, extra: Mapping[str, type] | None = None,
              required: tuple[str, ...] = (), skip: tuple[str, ...] = ()
              ) -> type[BaseModel]:
    """A strict pydantic model with ``cls``'s dataclass fields (+ ``extra`` keys).

    Every field is optional (the dataclass supplies defaults and checks what it requires),
    except the ``required`` ones; ``skip`` fields are not keys of the section.
    """
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}  # Any: mypy cannot type create_model's field definitions
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        hint = hints[f.name]
        fields[f.name] = (hint, ...) if f.name in required else (hint | None, None)
    for key, hint in (extra or {}).items():
        fields[key] = (hint | None, None)
    model: type[BaseModel] = create_model(name, __config__=_STRICT, **fields)
    return model


def _sections() -> dict[str, type]:
    """The section models (imported lazily: the stage modules are heavy, and some import this)."""
    from capjudge.aggregate import AggregateConfig
    from capjudge.ingest import IngestConfig
    from capjudge.judge import JudgeConfig
    from capjudge.methods import aggregate_settings
    from capjudge.report import ReportConfig
    from capjudge.validate import ValidateConfig

    ingest = _model_of("IngestParams", IngestConfig, STAGE_KEYS["ingest"])
    judge = _model_of("JudgeParams", JudgeConfig)
    entry = _model_of("JudgeEntryParams", JudgeConfig, STAGE_KEYS["judges"],
                      required=("method", "backend"))
    context_entry = _model_of("ContextJudgeEntryParams", JudgeConfig,
                              STAGE_KEYS["context_judges"], required=("method", "backend"))
    return {
        "sample": SampleParams,
        "ingest": ingest,
        "runner": RunnerParams,
        "judge": judge,
        "judges": dict[str, entry],  # type: ignore[valid-type]
        "context_judges": dict[str, context_entry],  # type: ignore[valid-type]
        "contexts": dict[str, dict[str, Any]],  # per method: see _check_contexts
        # The methods' own settings (HarmonicEval's gamma) are keys of the section beside
        # AggregateConfig's (Method.aggregate_settings), not fields of a shared type.
        "aggregate": _model_of("AggregateParams", AggregateConfig,
                               {**STAGE_KEYS["aggregate"],
                                **{key: float for key in aggregate_settings()}},
                               skip=("settings",)),
        "validate": _model_of("ValidateParams", ValidateConfig, STAGE_KEYS["validate"]),
        "report": _model_of("ReportParams", ReportConfig, STAGE_KEYS["report"]),
        "watch": WatchParams,
    }


def params_model() -> type[BaseModel]:
    """The whole file's pydantic model (for validation and for generating its reference).

    Built once per set of method settings the registry holds (a plugin method may add one):
    building it takes ~20 ms, and every CLI run and stage validates its params.
    """
    from capjudge.methods import aggregate_settings

    return _params_model(tuple(sorted(aggregate_settings())))


@functools.lru_cache(maxsize=8)
def _params_model(settings: tuple[str, ...]) -> type[BaseModel]:
    # Field names get a suffix and the key is the alias: ``validate`` would shadow a
    # BaseModel method.
    fields: dict[str, Any] = {f"{name}_": (model | None, Field(default=None, alias=name))
              for name, model in _sections().items()}
    model: type[BaseModel] = create_model("Params", __config__=_STRICT, **fields)
    return model


def _path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _valid_keys(model: Any, loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed next to the last element of ``loc`` (walks the model along ``loc``)."""
    for part in loc[:-1]:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = _keys(model).get(str(part))
            if field is None:
                return []
            model = field.annotation
        else:
            model = _value_type(model)
        model = _unwrap_optional(model)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(_keys(model))
    return []


def _keys(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by the key written in the file (the alias, when there is one)."""
    return {f.alias or name: f for name, f in model.model_fields.items()}


def _unwrap_optional(hint: Any) -> Any:
    """``X`` of ``X | None``; anything else unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _value_type(hint: Any) -> Any:
    """``V`` of ``dict[str, V]`` (a named entry's model)."""
    args = typing.get_args(_unwrap_optional(hint))
    return args[1] if typing.get_origin(_unwrap_optional(hint)) is dict and len(args) == 2 \
        else hint


def suggest(word: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or the list of them."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (valid: {', '.join(sorted(choices))})" if choices else ""


def _message(error: Any, model: type[BaseModel]) -> str:
    """One line for pydantic's first error: the key path, what is wrong, the closest key."""
    loc = tuple(error["loc"])
    where = _path(loc)
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key{suggest(str(loc[-1]), _valid_keys(model, loc))}"
    if error["type"] == "missing":
        return f"{where}: missing (required)"
    if error["type"] in ("model_type", "dict_type"):
        return f"{where}: expected a mapping, got {error['input']!r}"
    return f"{where}: {error['msg']}, got {error['input']!r}"


def _check_ids(data: Mapping[str, object]) -> None:
    """Method names and backend kinds must be registered (the registries import nothing)."""
    from capjudge.backends import backend_kinds
    from capjudge.methods import method_names

    methods, kinds = method_names(), backend_kinds()
    for group in ("judges", "context_judges", "contexts"):
        section = data.get(group) or {}
        if not isinstance(section, dict):
            continue  # the schema has refused it already
        for name, entry in section.items():
            if not isinstance(entry, dict):
                continue
            method = entry.get("method")
            if method is not None and method not in methods:
                raise ParamsError(f"{group}.{name}.method: unknown method {method!r}"
                                  f"{suggest(str(method), methods)}")
            options = entry.get("method_options")
            if method is not None and isinstance(options, dict) and group != "contexts":
                _check_choices(f"{group}.{name}.method_options", str(method), options)
            backend = entry.get("backend")
            if isinstance(backend, str):
                kind = backend.partition("/")[0]
                if kind not in kinds:
                    raise ParamsError(f"{group}.{name}.backend: unknown backend kind {kind!r} "
                                      f"in {backend!r}{suggest(kind, kinds)}")
                _check_backend_options(data, group, str(name), entry, backend)


def _check_backend_options(data: Mapping[str, object], group: str, name: str,
                           entry: Mapping[str, object], backend: str) -> None:
    """The ``backend_options`` a judge will pass must be ones its backend class declares.

    The backend refuses an unknown option itself, but only when the stage builds it, inside
    the running flow; here the same check runs on the class's ``options`` alone (the module is
    imported, nothing is built: no model load, no network), with the closest valid option.
    A judge without its own ``backend_options`` takes the shared ``judge`` section's.
    """
    from capjudge.backends import backend_class
    from capjudge.protocol import BackendError

    where, owner = f"{group}.{name}.backend_options", repr(backend)
    options = entry.get("backend_options")
    common = data.get("judge") if group != "contexts" else None
    if "backend_options" not in entry and isinstance(common, dict):
        where, options = "judge.backend_options", common.get("backend_options")
        owner += f" of {group}.{name}"
    if not isinstance(options, dict) or not options:
        return
    try:
        accepted = getattr(backend_class(backend), "options", None)
    except BackendError:
        return  # a plugin that cannot be loaded: the stage reports it when it builds the judge
    if not isinstance(accepted, (set, frozenset, list, tuple)):
        return  # a backend that declares no options: it checks its own when it is built
    valid = sorted(str(o) for o in accepted)
    for key in options:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ParamsError(f"{where}.{key}: unknown option of backend {owner}{hint}; "
                              f"it accepts: {', '.join(valid)}")


def _check_choices(where: str, method: str, options: Mapping[str, object]) -> None:
    """A method's named options (``prompt_variant``, ``verdict_format`` ...) take its values."""
    from capjudge.methods import check_method_options

    try:
        check_method_options(method, options)
    except ValueError as exc:
        raise ParamsError(f"{where}: {exc}") from None


def _check_contexts(data: Mapping[str, object]) -> None:
    """Each ``contexts.<name>`` against its method's context settings (the method owns them)."""
    from capjudge.methods import default_context_method, get_method
    from capjudge.registry import RegistryError

    contexts = data.get("contexts") or {}
    if not isinstance(contexts, dict):
        return  # the schema has refused it already
    # Loading every method to find the default is done once, and only if a section needs it.
    default = default_context_method() if any(
        not entry.get("method") for entry in contexts.values()) else None
    for name, entry in contexts.items():
        method = entry.get("method") or default
        try:
            settings = get_method(method).context_settings() if method else None
        except RegistryError as exc:  # no such method, or a plugin that cannot be loaded
            raise ParamsError(f"contexts.{name}.method: {exc.args[0]}") from None
        if settings is None:
            continue
        model = _model_of("ContextParams", settings, STAGE_KEYS["contexts"])
        try:
            model.model_validate(entry)
        except ValidationError as exc:
            error = exc.errors()[0]
            error = {**error, "loc": ("contexts", name, *error["loc"])}
            raise ParamsError(_message_for(error, model, 2)) from None


def _message_for(error: Any, model: type[BaseModel], depth: int) -> str:
    """:func:`_message` for a model validated at ``depth`` keys below the top."""
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        return f"{_path(loc)}: unknown key{suggest(str(loc[-1]), list(_keys(model)))}"
    return _message({**error, "loc": loc[depth:]}, model).replace(
        _path(loc[depth:]), _path(loc), 1)


def validate_params(data: object) -> dict[str, JSONValue]:
    """Check a loaded params mapping against the schema; return it unchanged.

    Raises:
        ParamsError: the first problem, one line naming the key path (and the closest key).
    """
    if not isinstance(data, dict):
        raise ParamsError(f"expected a mapping at the top level, got {type(data).__name__}")
    for group in ("contexts",):
        for name, entry in (data.get(group) or {}).items():
            if not isinstance(entry, dict):
                raise ParamsError(f"{group}.{name}: expected a mapping, got {entry!r}")
    model = params_model()
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise ParamsError(_message(exc.errors()[0], model)) from None
    _check_ids(data)
    _check_contexts(data)
    return data


def flow_style_hazards(text: str) -> list[str]:
    """Values that ``dvc exp run -S`` would write back in a form DVC itself cannot read.

    ``-S`` (``capjudge watch`` uses it too) rewrites the whole file through ruamel.yaml, which
    drops the quotes of a string such as ``"http://host:8000/v1"`` inside a flow-style
    ``{...}`` or ``[...]``; DVC's reader (libyaml) refuses a ``:`` in an unquoted flow scalar,
    and every later DVC command stops with "YAML file structure is corrupted". Block style
    (one key per line) is safe.

    Args:
        text: the params file's text.

    Returns:
        One line per such value, ``<key path>: '<value>' in a flow-style mapping ...``; empty
        when the file is safe to rewrite (or is not YAML: the loader reports that).
    """
    try:
        root = yaml.compose(text, Loader=YAML_LOADER)
    except yaml.YAMLError:
        return []
    found: list[str] = []

    def walk(node: yaml.Node, path: str, in_flow: bool) -> None:
        if isinstance(node, yaml.ScalarNode):
            # ruamel quotes ": " itself; a ':' followed by anything else stays bare.
            if in_flow and node.tag.endswith(":str") and re.search(r":(?=\S)", node.value):
                found.append(f"{path}: {node.value!r} in a flow-style {{...}}/[...]: "
                             "`dvc exp run -S` would unquote it and DVC could not read the "
                             "file again; write the mapping in block style, one key a line")
            return
        flow = in_flow or bool(getattr(node, "flow_style", False))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, f"{path}.{key.value}" if path else str(key.value), flow)
        elif isinstance(node, yaml.SequenceNode):
            for i, value in enumerate(node.value):
                walk(value, f"{path}[{i}]", flow)

    if root is not None:
        walk(root, "", False)
    return found


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read and check the params file: the one entry point for flows and the CLI.

    Returns:
        The file's mapping, as written (the stages build their configs from it).

    Raises:
        FileNotFoundError: no such file.
        ParamsError: not YAML, not a mapping, or a key, type or id that does not fit the
            schema (one line: ``<path>: <key path>: <problem> (did you mean ...?)``).
        capjudge.util.credentials.CredentialsInURLError: a URL in it carries credentials.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: params file not found (run from the project root)")
    try:
        text = p.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=YAML_LOADER) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ParamsError(f"{p}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{p}: expected a mapping at the top level, got {type(data).__name__}")
    # Readable as it is, but not once `dvc exp run -S` (or capjudge watch) has rewritten it.
    for hazard in flow_style_hazards(text):
        log.warning("%s: %s", p, hazard)
    # DVC records params in dvc.lock and the flows pass sections on as Prefect parameters: a
    # URL with user-info in here would be persisted, so no flow starts with one.
    refuse_credentials(data, "")
    try:
        validate_params(data)
    except ParamsError as exc:
        raise ParamsError(f"{p}: {exc}") from None
    return data


__all__ = ["STAGE_KEYS", "ParamsError", "RunnerParams", "SampleParams", "WatchParams",
           "flow_style_hazards", "load_params", "params_model", "suggest", "validate_params"]
