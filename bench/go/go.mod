module github.com/fenceq/fenceq/bench/go

go 1.19

require github.com/fenceq/fenceq/clients/go v0.0.0

replace github.com/fenceq/fenceq/clients/go => ../../clients/go
