/// `openapi/openapi.yaml`, embedded at build time (the resource is a
/// symbolic link to that file), so `GET /openapi.yaml` serves the one
/// document verbatim without a resource bundle beside the binary.
enum OpenAPIDocument {
    static var bytes: [UInt8] { PackageResources.openapi_yaml }
}
