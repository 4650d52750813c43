"""Generated packages: writing one (:mod:`.write`) and loading one (:mod:`.load`)."""
from .load import PackageKernels, PackageModel, is_generated_package, load_package, read_manifest
from .write import Package, default_package_name, generate_package, package_files

__all__ = ["Package", "PackageKernels", "PackageModel", "default_package_name", "generate_package", "is_generated_package",
           "load_package", "package_files", "read_manifest"]
