module github.com/tinyhost/tinyhost/abi

go 1.26
