package config

// withOutlierDefaults is s with outlier detection's defaults.
func (s Settings) withOutlierDefaults() Settings {
	s.Outlier = Defaults().Outlier
	return s
}
