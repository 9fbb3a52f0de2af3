module github.com/lockstream/lockstream/examples/go

go 1.26.0

replace github.com/lockstream/lockstream/gen/go => ../../gen/go

replace github.com/lockstream/lockstream/clients/go => ../../clients/go

require (
	github.com/lockstream/lockstream/clients/go v0.1.0
	github.com/lockstream/lockstream/gen/go v0.1.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
