"""A chat template to render rows with (`--chat-template`): a `.jinja` file, a tokenizer folder
or a Hugging Face Hub model id, loaded with transformers' `AutoTokenizer` (the optional
`templates` extra) and compiled once per process.

A run's config holds only what the user gave (`Config.chat_template`, a path or an id), so that
it travels to worker processes and Ray tasks as text; each process loads and compiles it once
(`load_template` is cached), as `tokens.load_tokenizer` does for `--tokenizer`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

from transcript_clean.errors import ConfigError, option, option_name

__all__ = [
    "ARGUMENTS_AS",
    "ChatTemplate",
    "check_template",
    "load_template",
    "marks_generation",
]

_GENERATION: Final = re.compile(r"\{%-?\s*generation\s*-?%\}")
"""How transformers tells a template that marks assistant output (`return_assistant_tokens_mask`
needs it)."""

_HUB_ID: Final = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")

# Where a message's reasoning goes: the first of these the template reads, else the standard one.
_REASONING_FIELDS: Final = ("reasoning_content", "thinking", "reasoning")


@dataclass(slots=True, frozen=True)
class ChatTemplate:
    """A loaded chat template, and the tokenizer it came with (None for a bare `.jinja` file
    without `--tokenizer`: then it renders text, and counts no tokens)."""

    spec: str
    """What the user gave: a path or a Hub id."""
    source: str
    """The template's Jinja text."""
    tokenizer: Any = field(default=None, compare=False)
    """A transformers tokenizer, or None."""
    special: dict[str, str] = field(default_factory=dict, compare=False)
    """The tokenizer's special tokens (`bos_token`, ...), which templates read."""

    @property
    def name(self) -> str:
        """Its short name in messages: the file's or folder's name, or the Hub id."""
        path = Path(self.spec)
        return path.name if path.exists() else self.spec

    @property
    def marks_generation(self) -> bool:
        """Whether it marks assistant output (`{% generation %}`): without it, no mask."""
        return marks_generation(self.source)

    @property
    def reasoning_field(self) -> str:
        """The message field its reasoning is read from."""
        return next((f for f in _REASONING_FIELDS if f in self.source), _REASONING_FIELDS[0])


def marks_generation(source: str) -> bool:
    return _GENERATION.search(source) is not None


def _transformers() -> Any:
    """transformers, imported quietly (it warns on import that PyTorch is absent, which
    rendering never needs)."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import transformers
    except ImportError:
        raise ConfigError(
            f"{option_name('chat_template')} needs the transformers package: "
            "pip install 'transcript-clean[templates]'"
        ) from None
    return transformers


@cache
def load_template(spec: str, tokenizer: str | None = None) -> ChatTemplate:
    """The chat template `spec` names, loaded and compiled once per process. `tokenizer`: a
    `tokenizer.json` (`--tokenizer`) to count a `.jinja` file's tokens with."""
    transformers = _transformers()
    from transformers.utils.chat_template_utils import _compile_jinja_template

    path = Path(spec)
    if path.is_file():
        source = _read_source(path, spec)
        loaded = None
        if tokenizer is not None:
            from transcript_clean.tokens import check_tokenizer

            check_tokenizer(tokenizer)
            loaded = transformers.PreTrainedTokenizerFast(
                tokenizer_file=tokenizer, chat_template=source
            )
    elif path.is_dir():
        loaded = _from_pretrained(transformers, spec, local=True)
        source = _template_of(loaded, spec)
    elif path.exists():
        raise ConfigError(f"{option('chat_template', spec)}: not a file or a folder")
    elif _HUB_ID.fullmatch(spec) and "/" in spec:
        loaded = _from_pretrained(transformers, spec, local=False)
        source = _template_of(loaded, spec)
    else:
        raise ConfigError(
            f"{option('chat_template', spec)}: no such file or folder, and not a Hub model id "
            "(give a .jinja file, a tokenizer folder or OWNER/MODEL)"
        )
    try:
        _compile_jinja_template(source)  # once per process: transformers caches it by its text
    except Exception as err:  # jinja2's TemplateSyntaxError, or an old jinja2
        raise ConfigError(
            f"{option('chat_template', spec)}: not a template Jinja reads ({err})"
        ) from None
    special = {} if loaded is None else dict(loaded.special_tokens_map)
    special = {k: v for k, v in special.items() if isinstance(v, str)}
    return ChatTemplate(spec, source, loaded, special)


def check_template(spec: str, tokenizer: str | None = None) -> ChatTemplate:
    """Fail before a run starts when the template cannot be loaded."""
    return load_template(spec, tokenizer)


def _read_source(path: Path, spec: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{option('chat_template', spec)}: not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"{option('chat_template', spec)}: cannot read it ({err})") from None


def _from_pretrained(transformers: Any, spec: str, *, local: bool) -> Any:
    """`AutoTokenizer.from_pretrained`, its failures in one line: a folder's are what is wrong
    with it, a Hub id's most often that the Hub cannot be reached."""
    try:
        return transformers.AutoTokenizer.from_pretrained(spec, local_files_only=local)
    except Exception as err:  # OSError, ValueError, the Hub's HTTP errors: all one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = "a tokenizer folder" if local else "the Hugging Face Hub"
        raise ConfigError(
            f"{option('chat_template', spec)}: cannot load a tokenizer from {where}: {first}"
        ) from None


def _template_of(tokenizer: Any, spec: str) -> str:
    try:
        source = tokenizer.get_chat_template()
    except ValueError:
        source = None
    if not isinstance(source, str):
        raise ConfigError(
            f"{option('chat_template', spec)}: its tokenizer has no chat template "
            "(tokenizer_config.json's chat_template, or chat_template.jinja)"
        )
    return source


ARGUMENTS_AS: Final = ("object", "string", "auto")
