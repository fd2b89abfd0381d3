module dsh-conformance.invalid/examples/go-host

go 1.22
