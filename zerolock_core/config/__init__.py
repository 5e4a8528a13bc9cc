"""The run's settings: every field defined once (run_fields), its words in messages, the validated
RunConfig, TOML files, the α ramp and the readout spec. The bottom room: it imports only itself and the
engine's leaf modules."""
