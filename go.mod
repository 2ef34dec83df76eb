module github.com/axgate/axgate

go 1.25.0

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1
	go.yaml.in/yaml/v3 v3.0.6
)
