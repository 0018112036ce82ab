"""The GPU catalog: sourced SKU data files, validated on load, looked up by name or alias."""

from gpumatch.catalog.loader import Catalog, catalog_name, get_gpu, load_catalog
from gpumatch.catalog.schema import PRECISIONS, GpuFile
from gpumatch.catalog.spec import GpuSpec, Price

__all__ = ["PRECISIONS", "Catalog", "GpuFile", "GpuSpec", "Price", "catalog_name", "get_gpu", "load_catalog"]
