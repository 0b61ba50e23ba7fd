"""Thresher's stages: plain functions over polars LazyFrames, with no orchestrator inside."""
