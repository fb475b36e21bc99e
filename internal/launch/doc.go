// Package launch is what runs in a process worker's launcher and in the process that becomes
// the worker (its stage), both the runtime binary re-executed (Linux only). It imports the
// standard library alone: the Go runtime initialises packages in the order of their import
// paths once their imports are, so this one's init, which takes over a re-executed binary,
// runs among the first, before the package initialisation of Caddy's modules (tens of
// milliseconds: chroma's lexers, x509 roots, CEL …), which a launcher would otherwise pay on
// every start. The sandbox decides everything (rules, filter, limits) and sends it as a Spec.
package launch
