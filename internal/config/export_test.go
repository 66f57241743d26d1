package config

// OperatorOwned exposes operatorOwned to the external tests.
var OperatorOwned = operatorOwned
