"""Which serving engine and which client an input or a thread is about.

The input side reads product names (and vLLM's own log markers) from what the user pasted. The thread
side is derived from the data, never from a list of favoured repositories: a thread's engine is the one
its repository is named after, else the one its title and error strings name; the canonical repository
of an engine is the one that holds most of that engine's threads in the index. So a repository synced
through ``GPTOSS_DOCTOR_REPOS`` gets the same treatment as the bundled ones.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from indexer.documents import Document
from service.analysis.needles import folded as folded_text
from service.analysis.platforms import detect_platform

_VLLM_OPTIONS = (
    "enable_auto_tool_choice",
    "structured_outputs_config",
    "guided_decoding_backend",
    "gpu_memory_utilization",
    "async_scheduling",
    "max_num_batched_tokens",
)
"""Options only vLLM takes (its docs' flags and config names), written with ``-`` or ``_``."""


def _option_pattern(option: str) -> str:
    return r"\b" + r"[-_]".join(option.split("_")) + r"\b"


# Product names as they appear in logs, repository names and thread titles. Order matters only for ties.
ENGINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # vLLM also by the names only its own options carry (its docs' flags and its gpt-oss reasoning parser).
    (
        "vllm",
        re.compile(
            "|".join(
                [r"\bvllm\b|\(APIServer pid=|\bEngineCore_?\w{0,8} pid=|\bopenai_gptoss\b"]
                # The source tag of vLLM's log format on a record of its OpenAI server ("[serving_chat.py:1001]").
                + [r"\[(?:serving_(?:chat|responses|completion|engine)|api_server|harmony_utils)\.py:\d{1,5}\]"]
                + [_option_pattern(option) for option in _VLLM_OPTIONS]
            ),
            re.I,
        ),
    ),
    # SGLang's own records name it only in tracebacks: its start-up line and its batch metrics are its own.
    (
        "sglang",
        re.compile(
            r"\bsglang\b|\bsgl[-_](?:project|kernel|router)\b"
            r"|server_args=ServerArgs\(|\b(?:Prefill|Decode) batch[.,] #"
            r'|"matched_stop":',  # a field only SGLang's OpenAI-compatible choices carry
            re.I,
        ),
    ),
    # Ollama names models by tag (gpt-oss:20b, as its threads in the KB do) and listens on port 11434.
    ("ollama", re.compile(r"\bollama\b|\bgpt-oss:\d{2,3}b\b|:11434\b", re.I)),
    # llama.cpp also by its loader's records ("llama_model_load: error loading model"), which its wrappers relay.
    (
        "llama.cpp",
        re.compile(r"llama\.cpp|llama[-_]cpp|\bllama-server\b|\bggml\b|\bik_llama\b|\bllama_model_load\b", re.I),
    ),
    ("lm-studio", re.compile(r"\blm ?studio\b|\blmstudio\b|\blms (?:server|load)\b", re.I)),
    ("tensorrt-llm", re.compile(r"tensorrt[-_ ]?llm|\btrt[-_]?llm\b", re.I)),
    ("dynamo", re.compile(r"(?<![\w.])(?:ai-)?dynamo\b", re.I)),
    ("mlx", re.compile(r"\bmlx(?:[-_]\w{1,20})?\b", re.I)),
    ("lmdeploy", re.compile(r"\blmdeploy\b", re.I)),
    ("tgi", re.compile(r"text-generation-inference|\btgi\b", re.I)),
    ("xinference", re.compile(r"\bxinference\b", re.I)),
)

_Table = tuple[tuple[str, re.Pattern[str]], ...]


def _ascii_words(table: _Table) -> _Table:
    """The table with ASCII word boundaries: a name written against Chinese or Japanese text
    ("后端使用sglang推理") is still a word of its own."""
    return tuple((name, re.compile(p.pattern, (p.flags & ~re.UNICODE) | re.ASCII)) for name, p in table)


ENGINES = _ascii_words(ENGINES)

# Client frameworks, by the names their packages, repositories and errors carry. The more specific
# framework comes before the SDK it is built on.
CLIENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("llama-stack", re.compile(r"llama[_ -]stack", re.I)),
    # LangChain's chat model classes name it too ("ChatOllama", "ChatBedrockConverse").
    (
        "langchain",
        re.compile(
            r"\blang(?:chain|graph)|\bChat(?:Ollama|OpenAI|Anthropic|VertexAI|BedrockConverse|Bedrock|Groq|Cerebras)\b",
            re.I,
        ),
    ),
    ("litellm", re.compile(r"\blitellm\b", re.I)),
    ("openai-agents", re.compile(r"openai[-_ ]agents|\bagents\.(?:exceptions|run)\b", re.I)),
    ("codex", re.compile(r"\bcodex(?:[-_ ]?cli)?\b", re.I)),  # "codex-cli 0.22.0", "CodexCLI"
    ("crewai", re.compile(r"\bcrewai\b", re.I)),
    ("pydantic-ai", re.compile(r"pydantic[_ -]ai\b", re.I)),
    ("smolagents", re.compile(r"\bsmolagents\b", re.I)),
    ("cline", re.compile(r"\bcline\b", re.I)),
    ("openhands", re.compile(r"\bopen[- ]?hands\b", re.I)),
    # NVIDIA's NeMo Agent Toolkit, also by its agents' logger names (package aiq, later nat).
    ("nemo-agent-toolkit", re.compile(r"\bnemo[- ]agent[- ]toolkit\b|\b(?:aiq|nat)\.agent\.\w{1,40}_agent\b", re.I)),
    ("claude-code", re.compile(r"\bclaude[- ]code\b(?!-router)", re.I)),
    # Vercel's AI SDK by its package scope and its name. Not by the AI_ tag of its errors: the tools built on it
    # relay a server's error under that tag ("AI_RetryError: ... Last error: <the server's message>").
    ("ai-sdk", re.compile(r"@ai-sdk/|\b(?i:vercel )?AI SDK\b")),
    ("continue", re.compile(r"\bcontinuedev\b|\bcontinue\.dev\b", re.I)),
    ("open-webui", re.compile(r"open[-_ ]?webui", re.I)),
    ("guidellm", re.compile(r"\bguidellm\b", re.I)),
    ("llmperf", re.compile(r"\bllmperf\b", re.I)),
    ("ollama-python", re.compile(r"\bollama\._types\b|ollama[-_]python|\bollama/_client\.py")),
    ("bedrock", re.compile(r"\bbotocore\b|\bbedrock\b", re.I)),
    ("openai-python", re.compile(r"\bopenai\.\w+Error\b|\bfrom openai import\b|openai\._base_client|openai-python")),
    ("httpx", re.compile(r"\bhttpx\b")),
    ("requests", re.compile(r"\brequests\.exceptions")),
)

CLIENTS = _ascii_words(CLIENTS)

SDK_CLIENTS = frozenset({"openai-python", "ollama-python", "httpx", "requests"})
"""Client libraries rather than applications: they relay what the server said and decide nothing."""

# A literal every match contains (lower-case), looked for in the input folded as re.IGNORECASE folds it
# (service/analysis/needles.py): on a long log a pattern runs only when its needle is there.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "vllm": (
        "vllm",
        "apiserver pid",
        "enginecore",
        "openai_gptoss",
        "serving_",
        "api_server.py:",
        "harmony_utils.py:",
        # Each option's first two words, in both spellings (``gpu_memory``, ``gpu-memory``).
        *(sep.join(option.split("_")[:2]) for option in _VLLM_OPTIONS for sep in "-_"),
    ),
    "ollama": ("ollama", "gpt-oss:", ":11434"),
    "sglang": ("sgl", "serverargs(", "prefill batch", "decode batch", '"matched_stop":'),
    "llama.cpp": ("llama", "ggml"),
    "xinference": ("xinference",),
    "lm-studio": ("studio", "lms "),
    "tensorrt-llm": ("tensorrt", "trt"),
    "lmdeploy": ("lmdeploy",),
    "tgi": ("tgi", "text-generation"),
    "llama-stack": ("llama",),
    "langchain": (
        "lang", "chatollama", "chatopenai", "chatanthropic", "chatvertexai", "chatbedrock", "chatgroq", "chatcerebras",
    ),  # fmt: skip
    "claude-code": ("claude",),
    "openhands": ("openhands", "open hands", "open-hands"),
    "nemo-agent-toolkit": ("nemo", "aiq.agent", "nat.agent"),
    "ai-sdk": ("ai-sdk", "ai sdk"),
    "openai-agents": ("agents",),
    "pydantic-ai": ("pydantic",),
    "continue": ("continue",),
    "open-webui": ("webui",),
    "ollama-python": ("ollama",),
    "bedrock": ("botocore", "bedrock"),
    "openai-python": ("openai",),
}
_APP_WORD = re.compile(r"[a-z0-9][a-z0-9._-]{2,60}")


@functools.lru_cache(maxsize=4)
def name_words(window: str) -> frozenset[str]:
    """The name-like words of ``window``, lower-cased (``mlx_lm.server``, ``librechat``).

    A lookup reads them three times (named client, named server, the retriever's repository names), so
    the last few inputs' sets are kept: a pure function of the text, bounded, safe across threads.
    """
    return frozenset(_APP_WORD.findall(window.lower()))


MAX_SCAN = 200_000
"""Characters of an input counted for engine mentions: the head and tail of a long log are enough."""


def _window(text: str) -> str:
    if len(text) <= MAX_SCAN:
        return text
    half = MAX_SCAN // 2
    return text[:half] + "\n" + text[-half:]


def _mentions(
    text: str, table: Sequence[tuple[str, re.Pattern[str]]], folded: str | None = None, cap: int = 50
) -> Counter[str]:
    """How often each name of ``table`` is mentioned (capped per name, so one spammy line cannot win)."""
    folded = folded_text(text) if folded is None else folded
    counts: Counter[str] = Counter()
    for name, pattern in table:
        if not any(n in folded for n in _NEEDLES.get(name, (name,))):
            continue
        for n, _ in enumerate(pattern.finditer(text), start=1):
            counts[name] = n
            if n >= cap:
                break
    return counts


# Engines that run llama.cpp inside them and relay its loader's records ("llama_model_load: error loading model",
# ggml lines) in their own logs.
_EMBED_LLAMA_CPP = frozenset({"ollama", "lm-studio"})
_LLAMA_CPP_BY_NAME = re.compile(r"llama\.cpp|llama[-_]cpp|\bllama-server\b|\bik_llama\b", re.I)


def detect_engines(text: str, failing: Sequence[str] = ()) -> list[str]:
    """Serving engines the input names: those in the failing lines first, then by how often named. llama.cpp's
    loader records in the log of an engine that embeds it (Ollama, LM Studio) are that engine's, unless the
    input names llama.cpp itself."""
    window = _window(text)
    counts = _mentions(window, ENGINES)
    first = _mentions("\n".join(failing), ENGINES) if failing else Counter()
    if "llama.cpp" in counts and _EMBED_LLAMA_CPP & counts.keys() and not _LLAMA_CPP_BY_NAME.search(window):
        del counts["llama.cpp"]
    return sorted(counts, key=lambda name: (-first[name], -counts[name]))


def fix_engine(doc: Document, engine_of: Mapping[str, str]) -> str | None:
    """The engine a thread's fix is for: the thread's own engine (``engine_of``: thread id -> engine), else
    vLLM's when the card says vLLM's server raised the failure (a flash-attention PR about vLLM's attention
    backends), else none."""
    engine = engine_of.get(doc.id)
    return engine if engine is not None else advised_engine(doc)


def advised_engine(doc: Document) -> str | None:
    """vLLM when the thread's failure is raised by vLLM's server (``error_source``), else none."""
    return "vllm" if doc.error_source == "vllm-server" else None


def detect_client(text: str) -> str | None:
    """The client framework that reported the error, if the input names one."""
    window = _window(text)
    folded = folded_text(window)
    for name, pattern in CLIENTS:
        if any(n in folded for n in _NEEDLES.get(name, (name,))) and pattern.search(window):
            return name
    return None


def _named_in(repo: str, table: Sequence[tuple[str, re.Pattern[str]]]) -> list[str]:
    """Names of ``table`` that a repository's own name carries, the last-named first ("vllm-mlx" -> mlx)."""
    found: list[tuple[int, str]] = []
    for name, pattern in table:
        matches = list(pattern.finditer(repo))
        if matches:
            found.append((matches[-1].start(), name))
    return [name for _, name in sorted(found, reverse=True)]


@functools.lru_cache(maxsize=1024)
def repo_engines(repo: str) -> tuple[str, ...]:
    """The engines a repository's own name names, the last-named first (``waybarrios/vllm-mlx`` -> mlx,
    vllm): the same few repositories come back lookup after lookup, so the answer is kept."""
    return tuple(_named_in(repo, ENGINES))


def _own_servers(documents: Sequence[Document], threads: Counter[str], taken: set[str]) -> dict[str, str]:
    """Repository -> engine name for servers the engine table does not name, from the data alone.

    A repository counts when most of its threads, and at least two, are failures of a server other than
    the reference engine (``error_source`` other-server), and its name is distinctive: the data uses the
    word mostly in that repository's own threads (``exo`` is; ``inference`` or ``transformers`` is not).
    """
    own = Counter(doc.repo for doc in documents if doc.repo and doc.error_source == "other-server")
    names = {
        repo: repo.split("/", 1)[1].lower()
        for repo, n in own.items()
        if n >= 2 and n * 2 > threads[repo] and repo not in taken and len(repo.split("/", 1)[1]) >= 3
    }
    wanted = set(names.values())
    inside: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    for doc in documents:
        if doc.repo is None:
            continue  # our own docs cite threads by their repository's name: no evidence of usage
        words = set(_APP_WORD.findall(f"{doc.title}\n{doc.text[:4000]}".lower())) & wanted
        for word in words:
            (inside if names.get(doc.repo or "") == word else outside)[word] += 1
    return {repo: name for repo, name in names.items() if outside[name] <= inside[name] // 2}


HARDWARE_COMPONENTS = frozenset(
    {"attention-backend", "quantization-kernels", "install-build", "multi-gpu", "performance", "speculative-decoding",
     "other"}
)  # fmt: skip
"""Components whose failures and fixes belong to a GPU platform (kernels, builds, parallelism, a crash on one
GPU). A Harmony, tool-call or API thread's fix holds on any GPU, whatever hardware its reporter named."""

_NAME_PARTS = re.compile(r"[-_.]")
NAMES_HEAD = 20_000
"""Characters at the head of an input searched for a tool's name written in words."""


@functools.lru_cache(maxsize=512)
def _spelled(name: str) -> re.Pattern[str]:
    """How a user writes a repository's name: ``roo-code`` as roo-code, roo_code, roo code or roocode."""
    parts = [re.escape(part) for part in _NAME_PARTS.split(name) if part]
    return re.compile(r"(?<![\w-])" + r"[-_. ]?".join(parts) + r"(?![\w-])", re.I)


def _named(text: str, names: frozenset[str]) -> set[str]:
    """The names of ``names`` the text carries, written as one word or as its parts."""
    if not names:
        return set()
    window = _window(text)
    found = set(name_words(window) & names)
    # A multi-part name written with spaces ("Roo Code") or run together ("roocode") is looked for where a
    # user names their tools, the head of the input; the pattern runs only for a name whose parts are
    # all words there, or whose joined form is one.
    head = window[:NAMES_HEAD]
    words = _word_parts(head)
    for name in names - found:
        parts = [part for part in _NAME_PARTS.split(name) if part]
        if len(parts) > 1 and (all(part in words for part in parts) or "".join(parts) in words):
            if any(_as_a_name(m.group(0)) for m in _spelled(name).finditer(head)):
                found.add(name)
    return found


@functools.lru_cache(maxsize=4)
def _word_parts(window: str) -> frozenset[str]:
    """The input's name-like words and their hyphen, underscore and dot parts (named client and named
    server read them for the same input)."""
    words = name_words(window)
    return frozenset(words | {part for word in words if _NAME_PARTS.search(word) for part in _NAME_PARTS.split(word)})


def _as_a_name(written: str) -> bool:
    """Spaced words name a product only in title case ("Roo Code", "Page Assist"), not in prose ("any llm",
    "a fast agent"); a joined form ("roocode", "roo-code") is a name as it is."""
    return " " not in written or all(word[:1].isupper() or word[:1].isdigit() for word in written.split())


@dataclass(frozen=True)
class ThreadEngines:
    """Engine, client and canonical-ness of every thread of one index generation (computed once)."""

    engine: dict[str, str] = field(default_factory=dict)
    """Thread id -> the engine it is about (absent when it names none)."""
    client: dict[str, str] = field(default_factory=dict)
    """Thread id -> the client framework whose repository it is in."""
    canonical: dict[str, str] = field(default_factory=dict)
    """Engine -> the repository holding most of its threads (its upstream)."""
    repo_engine: dict[str, str] = field(default_factory=dict)
    """Repository -> the engine it is named after (the engine's own tracker, its forks and platforms)."""
    platforms: frozenset[str] = frozenset()
    """Repositories carrying the name of an engine's canonical one: its forks and downstream platforms."""
    default_engine: str | None = None
    """The engine most threads are about: what an input that names none most likely runs."""
    client_names: frozenset[str] = frozenset()
    """Names of repositories whose threads are mostly client-side: client applications, from the data."""
    server_names: frozenset[str] = frozenset()
    """Names of the other serving engines the data knows (exo, gpustack, ...), beyond the named ones:
    repositories whose threads are mostly about their own server and whose name the data uses for it."""
    platform: dict[str, str] = field(default_factory=dict)
    """Thread id -> the accelerator platform (:func:`~service.analysis.platforms.detect_platform`) of a hardware
    thread whose repository, title or error strings name one; a Harmony or API thread has none."""

    @classmethod
    def from_documents(cls, documents: Sequence[Document]) -> ThreadEngines:
        """Derive every thread's engine from its repository name, else its title and error strings."""
        engine: dict[str, str] = {}
        client: dict[str, str] = {}
        per_repo: dict[str, Counter[str]] = {}
        repo_engine: dict[str, str] = {}
        client_side: Counter[str] = Counter()
        threads: Counter[str] = Counter()
        for doc in documents:
            if doc.repo is None:
                continue
            threads[doc.repo] += 1
            client_side[doc.repo] += doc.error_source == "client" or doc.component == "client-integration"
            named = list(repo_engines(doc.repo))
            if named:
                repo_engine[doc.repo] = named[0]
            if not named:
                own = _mentions("\n".join([doc.title, *doc.error_signatures[:10]]), ENGINES)
                top = own.most_common(2)
                # Only a thread that names one engine more than any other is that engine's thread.
                if top and (len(top) == 1 or top[0][1] > top[1][1]):
                    named = [top[0][0]]
            if named:
                engine[doc.id] = named[0]
                per_repo.setdefault(named[0], Counter())[doc.repo] += 1
            clients = _named_in(doc.repo, CLIENTS)
            if clients:
                client[doc.id] = clients[0]
        # A repository mostly about client-side failures, not named after an engine, is a client
        # application: its own name is what a user of it writes.
        apps = {
            repo: repo.split("/", 1)[1].lower()
            for repo, n in threads.items()
            if client_side[repo] * 2 > n and repo not in repo_engine and len(repo.split("/", 1)[1]) >= 4
        }
        for doc in documents:
            if doc.repo in apps and doc.id not in client:
                client[doc.id] = apps[doc.repo]
        servers = _own_servers(documents, threads, set(repo_engine) | set(apps))
        for doc in documents:
            if doc.repo in servers and doc.id not in engine:
                engine[doc.id] = servers[doc.repo]
                per_repo.setdefault(servers[doc.repo], Counter())[doc.repo] += 1
        repo_engine.update(servers)
        canonical = {name: repos.most_common(1)[0][0] for name, repos in per_repo.items()}
        # A fork or platform carries the upstream's own name (tenstorrent/vllm, vllm-ascend, worker-vllm);
        # independent servers of one family (several MLX servers) do not.
        platforms = frozenset(
            repo
            for repo, name in repo_engine.items()
            if name in canonical
            and canonical[name] != repo
            and canonical[name].split("/", 1)[1].lower() in repo.split("/", 1)[1].lower()
        )
        totals = Counter(engine.values())
        default = totals.most_common(1)[0][0] if totals else None
        platform = {
            doc.id: found
            for doc in documents
            if doc.repo is not None
            and doc.component in HARDWARE_COMPONENTS
            and (found := detect_platform("\n".join([doc.repo, doc.title, *doc.error_signatures[:10]])))
        }
        return cls(
            engine=engine,
            client=client,
            canonical=canonical,
            repo_engine=repo_engine,
            platforms=platforms,
            default_engine=default,
            client_names=frozenset(apps.values()),
            server_names=frozenset(servers.values()),
            platform=platform,
        )

    def thread_engine(self, thread: str) -> str | None:
        """The engine a thread (``owner/name#number``) is about: the index's reading of it, else the engine its
        repository is named after."""
        return self.engine.get(thread) or self.repo_engine.get(thread.partition("#")[0])

    def named_server(self, text: str) -> str | None:
        """A serving engine of the data (not one of :data:`ENGINES`) that the input names by its name."""
        found = sorted(_named(text, self.server_names))
        return found[0] if found else None

    def named_client(self, text: str) -> str | None:
        """A client application of the index that the input names by its repository's name."""
        found = sorted(_named(text, self.client_names))
        return found[0] if found else None

    def is_platform_copy(self, doc: Document) -> bool:
        """A thread in an engine's fork or downstream platform (a repository named after the engine)."""
        return doc.repo in self.platforms
