module github.com/lockstream/lockstream/test/jepsen/checker

go 1.26.0

require github.com/anishathalye/porcupine v1.3.1
