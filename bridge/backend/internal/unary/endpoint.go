package unary

// endpoint is where a client dials, and the :authority its calls carry
// unless Options say otherwise.
type endpoint struct {
	network, address, authority string
}
