module github.com/tinyhost/tinyhost/sdk

go 1.26

require github.com/tinyhost/tinyhost/abi v0.0.0

replace github.com/tinyhost/tinyhost/abi => ../abi
