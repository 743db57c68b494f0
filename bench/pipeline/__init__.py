"""Jobs that join the stages: `bench` (baseline and speculative runs, then every artefact)."""

from bench.pipeline._bench import PipelineConfig, check_servers, run_pipeline, server_tags, write_comparison

__all__ = ["PipelineConfig", "check_servers", "run_pipeline", "server_tags", "write_comparison"]
