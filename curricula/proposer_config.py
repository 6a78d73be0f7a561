"""The settings of the stage-2 curriculum (:class:`ProposerConfig`; part of
:mod:`darwin.curricula.proposer`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from darwin.policies.litellm import LiteLLMPolicyConfig
from darwin.templates import Language


class ProposerConfig(BaseModel):
    """Settings of :class:`LLMTaskProposer` (validated when built; frozen; holds no secrets)."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    llm: LiteLLMPolicyConfig | None = Field(
        None,
        description="the proposing model, as LiteLLMPolicyConfig fields (model, api_base, api_key_env, temperature, "
        "timeout_s, max_tokens, ...), e.g. {'model': 'gemini/gemini-2.5-flash', 'api_key_env': 'GEMINI_API_KEY'}; "
        "needed unless replay is set or a policy is passed",
    )
    templates: tuple[str, ...] | None = Field(
        None,
        description="the templates the model may propose: ids or glob patterns ('clock.*'); None = the templates the "
        "base tasks are instances of (a split's training templates when the tasks are 'gen.train')",
    )
    languages: tuple[Language, ...] | None = Field(
        None, min_length=1, description="languages a proposal may use; None = the base tasks' languages"
    )
    propose_every: int = Field(
        32, ge=1, le=1_000_000, description="finished episodes between calls (also before the first)"
    )
    max_proposals: int = Field(8, ge=1, le=64, description="task instances asked for (and kept) per call")
    max_calls: int = Field(50, ge=0, le=1_000_000, description="the call budget; base tasks only once it is spent")
    proposal_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="chance that a task comes from the proposal queue while it holds any (else a base task)",
    )
    learnable_band: tuple[float, float] = Field(
        (0.2, 0.8), description="the success rates the prompt calls learnable (MobileRL's success band)"
    )
    history_window: int = Field(
        50, ge=1, le=100_000, description="most recent episodes per template summarised for the model"
    )
    step_budget: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="step budget of proposed tasks; None = each template's own (set the experiment's horizon to match the base tasks)",
    )
    url: str | None = Field(
        None,
        description="SQLAlchemy URL (or SQLite file path) where calls and proposals are stored; None = the run's "
        "database (<run_dir>/run.db), or an in-memory database without a run directory",
    )
    replay: str | None = Field(
        None,
        description="replay the accepted proposals stored by an earlier run (its run directory, database file or URL) "
        "instead of calling a model",
    )

    @model_validator(mode="after")
    def _check(self) -> ProposerConfig:
        problems = []
        low, high = self.learnable_band
        if not 0.0 <= low <= high <= 1.0:
            problems.append(f"learnable_band must be (low, high) with 0 <= low <= high <= 1, got {self.learnable_band}")
        if self.replay is not None and self.llm is not None:
            problems.append(
                "replay replays stored proposals without a model: drop llm, or drop replay to call the model"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self
