# idiom: PoissonRegressor GLM in a Pipeline with a ColumnTransformer selected by dtype (make_column_selector); intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.linear_model import PoissonRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
X = train.drop(columns=["id", "visits"])
y = train["visits"]

prep = ColumnTransformer([
    ("num", StandardScaler(), make_column_selector(dtype_include="number")),
    ("cat", OneHotEncoder(handle_unknown="ignore"), make_column_selector(dtype_exclude="number")),
])
pipe = Pipeline([("prep", prep), ("glm", PoissonRegressor(max_iter=1000))])
search = GridSearchCV(pipe, {"glm__alpha": [1e-3, 1e-2, 1e-1, 1.0]}, cv=4, scoring="neg_root_mean_squared_error")
search.fit(X, y)
print("best alpha:", search.best_params_, "CV RMSE:", -search.best_score_)

pd.DataFrame({"id": test["id"], "visits": search.predict(test[X.columns])}).to_csv("submission.csv", index=False)
