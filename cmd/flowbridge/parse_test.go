package main

// parseConfig is loadConfig on the file's contents, for tests.
func parseConfig(data []byte, getenv func(string) string) (*Config, error) {
	return parse(data, getenv, fullScope)
}
