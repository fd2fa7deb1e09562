// Package depstest holds the layering of hpncp as a test: deps_test.go
// has one table saying which of the module's packages, and which
// third-party modules, each package may import, and go test fails on a
// package the table does not list or an import its row does not allow.
// docs/DESIGN.md, section 2, says the same layers in words.
package depstest
